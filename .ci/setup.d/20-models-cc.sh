# models: the TLS stack (rustls with aws-lc-rs) compiles C code, so a C compiler must exist.
if ! command -v cc >/dev/null 2>&1; then
  apt-get update -qq
  apt-get install -y -qq gcc libc6-dev >/dev/null
fi
