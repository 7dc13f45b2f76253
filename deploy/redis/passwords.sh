#!/bin/sh
# Print a new password for every Redis user of users.acl, as the lines of an env file:
#
#   sh deploy/redis/passwords.sh > deploy/.env     # compose reads it (docs/deploy.md)
#
# 32 hex characters each, from /dev/urandom: nothing in them needs escaping in a REDIS_URL.
set -euf
here=$(dirname "$0")
grep '^user ' "$here/users.acl" | while read -r _ name _; do
  [ "$name" = default ] && continue
  var="CONQUIAN_REDIS_PASSWORD_$(printf '%s' "$name" | tr 'a-z-' 'A-Z_')"
  printf '%s=%s\n' "$var" "$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
done
