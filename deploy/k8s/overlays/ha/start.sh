#!/bin/sh
# Starts nats-server with every KAGZI_NATS_PASSWORD_<USER> of its
# environment quoted, then hands over to it (exec): auth.conf refers to
# each password as $KAGZI_NATS_PASSWORD_<USER>, and nats-server parses a
# variable's value as a value of its configuration language, not as
# text: unquoted, 123456 is a number, 1k a size, true a boolean, $HOME
# another variable, "a b" a syntax error. In double quotes, with \ " tab,
# newline and carriage return escaped, any password is a string: the
# operator sets one value, which the Kagzi services read bare.
#
# compose.yaml and the Kubernetes dev overlay run it as
#   sh /etc/nats/start.sh --config /etc/nats/nats.conf
# POSIX sh and awk only (busybox in nats:2-alpine, dash and mawk on
# Debian; internal/natsauth's TestStartScriptTakesAnyPassword runs it).
set -eu
quoted=$(awk 'BEGIN {
  for (k in ENVIRON) {
    if (k !~ /^KAGZI_NATS_PASSWORD_[A-Za-z0-9_]+$/) continue
    v = ENVIRON[k]
    gsub(/[\\"]/, "\\\\&", v)
    gsub(/\t/, "\\t", v)
    gsub(/\n/, "\\n", v)
    gsub(/\r/, "\\r", v)
    print k "=\"" v "\""
  }
}')
while IFS= read -r kv; do
  if [ -n "$kv" ]; then export "$kv"; fi
done <<END
$quoted
END
exec nats-server "$@"
