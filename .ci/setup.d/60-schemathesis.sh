# server: schemathesis (PyPI), which fuzzes the running server through its own OpenAPI document
# (scripts/api-fuzz.sh). Pinned: a new version may add checks, which is a change to review.
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
  "schemathesis==4.32.5"
