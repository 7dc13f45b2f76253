#!/bin/sh
# Start a Redis Cluster node of Conquian: bring the addresses in its nodes.conf up to date, then
# run redis-server with the arguments given (and the Redis users of Conquian, with
# CLUSTER_ACL_TEMPLATE: below).  Used by deploy/compose.cluster.yaml and
# deploy/k8s-cluster/ (a verbatim copy there, checked by tests/deploy).
#
#   sh cluster-node.sh /path/to/redis.conf --cluster-enabled yes ... --cluster-announce-hostname NAME
#
# Why: the nodes talk to each other (the cluster bus) by IP address, and nodes.conf remembers
# each peer by the address it had.  A container or pod started again may get another address;
# a node that restarts alone is found again (it contacts its peers, which learn its new
# address), but after all of them restart (docker compose down/up, a rollout, a lost machine)
# every remembered address may be stale and the nodes never meet again.  Each node announces a
# name (cluster-announce-hostname), which nodes.conf keeps beside the address
# (`<id> <ip>:<port>@<bus-port>,<hostname>[,...] ...`): before Redis starts, every peer whose
# name resolves now gets its current address.  A peer not running yet keeps the old one; it
# resolves this node when it starts itself, contacts it, and this node learns its address.
set -eu

conf="${CLUSTER_NODES_CONF:-/data/nodes.conf}"

if [ -s "$conf" ]; then
    awk '
        NF >= 2 && $2 ~ /@[0-9]+,[^,]/ {
            split($2, part, ",")
            lookup = "getent hosts " part[2]
            address = ""
            if ((lookup | getline answer) > 0) {
                split(answer, word, " ")
                address = word[1]
            }
            close(lookup)
            # Keep ":<port>@<bus-port>" and what follows the name; replace the address.
            if (address != "" && match(part[1], /:[0-9]+@[0-9]+$/)) {
                rest = substr($2, length(part[1]) + 1)
                $2 = address substr(part[1], RSTART) rest
            }
        }
        { print }
    ' "$conf" >"$conf.new"
    mv "$conf.new" "$conf"
fi

# With CLUSTER_ACL_TEMPLATE (deploy/redis/users.acl), the node loads the Redis users of Conquian,
# as acl-server.sh does for the single Redis: render-acl.sh, next to the template, writes the
# ACL file beside nodes.conf with the digests of the CONQUIAN_REDIS_PASSWORD_<USER> passwords
# (it refuses to, and the node does not start, when one is missing).  Every node of a cluster
# needs the same users: a client that follows MOVED to another node authenticates there again.
# A node that is, or becomes, a replica authenticates to its master as the user `replica`:
# masteruser and masterauth go into a file of their own, included, so that the password shows
# in no process list.
if [ -n "${CLUSTER_ACL_TEMPLATE:-}" ]; then
    acl="$(dirname "$conf")/users.acl"
    sh "$(dirname "$CLUSTER_ACL_TEMPLATE")/render-acl.sh" "$CLUSTER_ACL_TEMPLATE" "$acl"
    replication="$(dirname "$conf")/replication.conf"
    (umask 077 && printf 'masteruser replica\nmasterauth %s\n' \
        "$CONQUIAN_REDIS_PASSWORD_REPLICA" >"$replication")
    set -- "$@" --aclfile "$acl" --include "$replication"
fi

# The image's entrypoint (where there is one) runs Redis as the redis user when started as root.
if command -v docker-entrypoint.sh >/dev/null 2>&1; then
    exec docker-entrypoint.sh redis-server "$@"
fi
exec redis-server "$@"
