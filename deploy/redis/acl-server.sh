#!/bin/sh
# Start the single Redis of Conquian with a user a service (users.acl): render the ACL file
# into the data folder from the passwords in the environment (render-acl.sh, next to this
# script), then run redis-server with the arguments given and that file.  Used by
# deploy/compose.yaml and deploy/k8s/redis.yaml (a verbatim copy there, checked by tests/deploy).
#
#   sh acl-server.sh /path/to/redis.conf [redis-server arguments ...]
#
# In the official image as root (compose), the image's entrypoint then hands the data folder,
# the ACL file with it, to the redis user and drops to it; as a non-root user (Kubernetes)
# redis-server starts directly.  The file holds SHA-256 digests, never a password.
set -eu
here=$(dirname "$0")
acl=/data/users.acl
sh "$here/render-acl.sh" "$here/users.acl" "$acl"
if [ "$(id -u)" = 0 ] && command -v docker-entrypoint.sh > /dev/null; then
  exec docker-entrypoint.sh redis-server "$@" --aclfile "$acl"
fi
exec redis-server "$@" --aclfile "$acl"
