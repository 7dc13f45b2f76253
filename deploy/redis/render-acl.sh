#!/bin/sh
# Render the Redis ACL file: deploy/redis/users.acl without its comments, each user but
# `default` with the SHA-256 of the password in CONQUIAN_REDIS_PASSWORD_<USER> (upper case)
# from the environment, so that the file holds no password.  Refuses (exit 1) when a password
# is missing or not 16+ of [A-Za-z0-9_-], the characters a REDIS_URL carries as they are.
# docs/deploy.md, "Redis users"; passwords.sh makes a set.
#
#   render-acl.sh TEMPLATE OUTPUT
set -euf  # -f: the key patterns' `*` are no file names
template=$1
output=$2
umask 077
tmp="$output.tmp.$$"
: > "$tmp"
while IFS= read -r line || [ -n "$line" ]; do
  case "$line" in
    '' | '#'*) continue ;;
  esac
  set -- $line
  if [ "$1" != user ]; then
    echo "render-acl: not a user line: $line" >&2; rm -f "$tmp"; exit 1
  fi
  name=$2
  case "$name" in
    '' | *[!a-z0-9_-]*) echo "render-acl: a user name of a-z 0-9 _ - only: $name" >&2; rm -f "$tmp"; exit 1 ;;
  esac
  shift 2
  # `reset` first: a user is exactly what its line says, whatever Redis held before.
  if [ "$name" = default ]; then
    printf 'user default reset %s\n' "$*" >> "$tmp"
    continue
  fi
  var="CONQUIAN_REDIS_PASSWORD_$(printf '%s' "$name" | tr 'a-z-' 'A-Z_')"
  eval "password=\${$var:-}"
  case "$password" in
    '' | *[!A-Za-z0-9_-]*)
      echo "render-acl: set $var (16 or more of A-Z a-z 0-9 _ -)" >&2; rm -f "$tmp"; exit 1 ;;
  esac
  if [ "${#password}" -lt 16 ]; then
    echo "render-acl: $var is shorter than 16 characters" >&2; rm -f "$tmp"; exit 1
  fi
  digest=$(printf '%s' "$password" | sha256sum | cut -d ' ' -f 1)
  printf 'user %s reset #%s %s\n' "$name" "$digest" "$*" >> "$tmp"
done < "$template"
mv "$tmp" "$output"
