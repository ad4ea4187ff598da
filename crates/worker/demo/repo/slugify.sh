#!/bin/sh
# slugify TEXT: prints TEXT as a URL slug: lower case letters and digits, words joined by dashes.
slugify() {
    printf '%s\n' "$1" | tr '[:upper:]' '[:lower:]' | sed -e 's/[^a-z0-9]/-/g'
}
