#!/usr/bin/env bash
# pg-dev.sh: a throwaway PostgreSQL server with pgvector, for trying
# synapse's PostgreSQL output (make pg-dev; docs/postgres.md). Not for data
# that matters: its directory is removed by `stop`.
#
#   examples/pg-dev.sh start    start one (or say where the running one is)
#   examples/pg-dev.sh status   say whether it runs, and its -o URL
#   examples/pg-dev.sh stop     stop it and remove its directory
#
# PG_SERVER is the server's installation (make pg-server's pginstall tree),
# PG_DEV_DIR its directory. The server listens on 127.0.0.1 only, on a free
# port, and its role `synapse` logs in with a random password (SCRAM) kept
# in PG_DEV_DIR/password (mode 0600); its Unix socket is in a directory
# only the server's user can enter (trust there, for the setup). As root,
# the server runs as PG_USER (PostgreSQL refuses to run as root).
set -euo pipefail

: "${PG_SERVER:?PG_SERVER: the PostgreSQL installation (make pg-server)}"
: "${PG_DEV_DIR:?PG_DEV_DIR: the directory of the throwaway server}"
PG_USER=${PG_USER:-synapse-pg}
bin=$PG_SERVER/bin
dir=$PG_DEV_DIR
srv=$dir/pg # the server user's: data, socket, log
as=()
if [ "$(id -u)" = 0 ]; then as=(runuser -u "$PG_USER" --); fi

url() { echo "postgresql://synapse@127.0.0.1:$(cat "$dir/port")/synapse?table=trial"; }

show() {
	local u base
	u=$(url)
	base=${u%%\?*}
	echo "pg-dev: PostgreSQL with pgvector on 127.0.0.1:$(cat "$dir/port") (a throwaway server in $dir)"
	echo "  export PGPASSWORD=\"\$(cat $dir/password)\""
	echo "  synapse embed CORPUS -m MODEL -o '$u'"
	echo "  (any table name: ?table=NAME; psql: $bin/psql '$base')"
	echo "stop it, removing its data: make pg-dev-stop"
}

running() {
	[ -f "$dir/port" ] && "${as[@]}" "$bin/pg_ctl" -D "$srv/data" status >/dev/null 2>&1
}

start() {
	if running; then
		echo "pg-dev: already running"
		show
		return
	fi
	[ ! -e "$dir" ] || stop >/dev/null
	umask 077
	mkdir -p "$dir" "$srv/sock"
	chmod 711 "$dir"
	[ ${#as[@]} = 0 ] || chown -R "$PG_USER" "$srv"
	od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$dir/password"
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' >"$dir/port"
	local port
	port=$(cat "$dir/port")
	"${as[@]}" "$bin/initdb" -D "$srv/data" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
		-E UTF8 --locale C --no-instructions >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; exit 1; }
	"${as[@]}" "$bin/pg_ctl" -D "$srv/data" -l "$srv/server.log" -w -t 60 -s \
		-o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$srv/sock -c unix_socket_permissions=0700" start ||
		{ "${as[@]}" cat "$srv/server.log" >&2; exit 1; }
	local pw
	pw=$(cat "$dir/password")
	psql_super() { "${as[@]}" "$bin/psql" -h "$srv/sock" -p "$port" -U postgres -X -q -v ON_ERROR_STOP=1 "$@"; }
	psql_super -d postgres -c "CREATE ROLE synapse LOGIN PASSWORD '$pw'" -c "CREATE DATABASE synapse OWNER synapse" >/dev/null
	psql_super -d synapse -c "CREATE EXTENSION vector" >/dev/null
	show
}

stop() {
	if running; then
		"${as[@]}" "$bin/pg_ctl" -D "$srv/data" -w -t 30 -s -m fast stop
	fi
	rm -rf "$dir"
	echo "pg-dev: stopped; $dir removed"
}

case "${1:-start}" in
start) start ;;
stop) stop ;;
status)
	if running; then show; else echo "pg-dev: not running (make pg-dev starts one)"; exit 1; fi
	;;
*)
	echo "usage: $0 start|status|stop" >&2
	exit 2
	;;
esac
