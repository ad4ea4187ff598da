#!/bin/sh
# Runs the slugify checks; exits non-zero when one fails.
. ./slugify.sh
failures=0
check() {
    got=$(slugify "$1")
    if [ "$got" = "$2" ]; then
        echo "ok   '$1' -> '$got'"
    else
        echo "FAIL '$1' -> '$got' (want '$2')"
        failures=$((failures + 1))
    fi
}
check "hello" "hello"
check "Hello World" "hello-world"
check "Hello, World!" "hello-world"
check "  spaced  out  " "spaced-out"
if [ "$failures" -ne 0 ]; then
    echo "$failures failing"
    exit 1
fi
echo "all passed"
