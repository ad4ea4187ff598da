# Base packages every test run needs: git for repository tests, ca-certificates for cargo,
# curl and openssl for the egress proxy's real-client tests, python3 for the public-surface check,
# and Debian's own python3 with pip in /usr: a proxied workspace on the host's system directories
# runs curl, git and pip from there.
if ! command -v git >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1 \
  || ! command -v openssl >/dev/null 2>&1 || ! command -v python3 >/dev/null 2>&1 \
  || ! /usr/bin/python3 -m pip --version >/dev/null 2>&1; then
  apt-get update -qq
  apt-get install -y -qq git ca-certificates curl openssl python3 python3-pip >/dev/null
fi
git config --global user.email >/dev/null 2>&1 || git config --global user.email "ci@auto-swe.invalid"
git config --global user.name >/dev/null 2>&1 || git config --global user.name "auto-swe ci"
