#!/bin/sh
# Form the Redis Cluster of Conquian once: `redis-cli --cluster create` over the nodes given,
# skipped when the cluster is already formed.  Run by deploy/compose.cluster.yaml (service
# redis-cluster-init) and deploy/k8s-cluster/ (Job redis-cluster-init, a verbatim copy that
# tests/deploy checks), after every node answers PING.
#
#   sh cluster-init.sh host:port host:port host:port ...     (CLUSTER_REPLICAS=0 by default)
#
# On nodes with the Redis users of Conquian (cluster-node.sh, CLUSTER_ACL_TEMPLATE), where the
# default user may only PING, set CLUSTER_USER=admin and the admin password in REDISCLI_AUTH
# (redis-cli reads it from there: it never shows in a process list).
#
# Exit 0 when the cluster is formed and its state is ok on every node given; 1 when a node
# does not answer, when the nodes are partly joined (a create cut short: look with
# `redis-cli --cluster check host:port`, repair with `--cluster fix`), or when the state does
# not become ok within the wait.  docs/deploy.md, "Redis Cluster".
set -eu

replicas="${CLUSTER_REPLICAS:-0}"
wait_s="${CLUSTER_WAIT_SECONDS:-120}"
[ "$#" -ge 3 ] || { echo "cluster-init: give at least three host:port" >&2; exit 1; }

# shellcheck disable=SC2086  # ${CLUSTER_USER:+...}: two words, or none
user_args() { echo ${CLUSTER_USER:+--user "$CLUSTER_USER"}; }

cli() { # cli host:port args...: redis-cli against one node, replies without CR
    node="$1"; shift
    # shellcheck disable=SC2046  # the user's two words
    redis-cli $(user_args) -h "${node%:*}" -p "${node##*:}" "$@" | tr -d '\r'
}

info_field() { # info_field host:port field: one field of CLUSTER INFO
    cli "$1" cluster info | sed -n "s/^$2://p"
}

wait_until() { # wait_until what command...: retry the command for up to $wait_s seconds
    what="$1"; shift
    waited=0
    until "$@"; do
        if [ "$waited" -ge "$wait_s" ]; then
            echo "cluster-init: gave up after ${wait_s}s waiting for $what" >&2
            return 1
        fi
        sleep 2
        waited=$((waited + 2))
    done
}

answers() { cli "$1" ping 2>/dev/null | grep -q PONG; }

all_ok() {
    for node in "$@"; do
        [ "$(info_field "$node" cluster_state)" = ok ] || return 1
    done
}

for node in "$@"; do
    wait_until "$node to answer PING" answers "$node"
done

# Formed: every slot is assigned, as seen from the first node.  (A master that is away makes
# the state `fail` until it is back; the wait below covers a restart.)
if [ "$(info_field "$1" cluster_slots_assigned)" = 16384 ]; then
    echo "cluster-init: the cluster is already formed; waiting for state ok"
    wait_until "cluster_state:ok" all_ok "$@"
    exit 0
fi

# Fresh: every node alone, no slot assigned.  Anything else is a create cut short.
for node in "$@"; do
    known="$(info_field "$node" cluster_known_nodes)"
    assigned="$(info_field "$node" cluster_slots_assigned)"
    if [ "$known" != 1 ] || [ "$assigned" != 0 ]; then
        echo "cluster-init: $node knows $known nodes and $assigned slots: partly formed;" \
            "check with redis-cli --cluster check $node, repair with --cluster fix" >&2
        exit 1
    fi
done

# CLUSTER MEET takes addresses, not names: give redis-cli each node's current address.  The
# nodes announce their names (cluster-announce-hostname), which is what clients are sent.
addresses=""
for node in "$@"; do
    host="${node%:*}"
    case "$host" in
        *[!0-9.]*) address="$(getent hosts "$host" | awk '{ print $1; exit }')" ;;
        *) address="$host" ;;  # an IPv4 address already
    esac
    [ -n "$address" ] || { echo "cluster-init: cannot resolve $host" >&2; exit 1; }
    addresses="$addresses $address:${node##*:}"
done

echo "cluster-init: creating the cluster over$addresses ($replicas replicas per master)"
# shellcheck disable=SC2086  # one word per address
# shellcheck disable=SC2046  # the user's two words
redis-cli $(user_args) --cluster create $addresses --cluster-replicas "$replicas" --cluster-yes
wait_until "cluster_state:ok" all_ok "$@"
echo "cluster-init: formed"
