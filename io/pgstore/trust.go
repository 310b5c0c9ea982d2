package pgstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The tables synapse reuses — the output T, synapse_state, and T's
// staging, keep and shard tables — must be the connecting role's: in a
// schema where another role may create tables (PostgreSQL 14's public, or
// any schema granted CREATE), she could create synapse_state first, grant
// it to PUBLIC and put a trigger on it, and her function would run as the
// writing role at every checkpoint. So each one that exists is checked in
// the catalog before any work: owned by the role that connects, with no
// trigger, rule or row-level security policy on it. Anything else is
// refused (exit 2), naming the table, its owner and what is on it.

// reusedTable is what the catalog says of one table synapse would use.
type reusedTable struct {
	name, owner               string
	mine                      bool
	triggers, rules, policies int64
	rowSecurity               bool
}

// reusedTables are T, StateTable and every table named T_synapse_… in the
// schemas of the connection's search_path, as the catalog has them.
func reusedTables(ctx context.Context, conn *pgx.Conn, table string) ([]reusedTable, error) {
	const q = `SELECT c.relname::text, pg_get_userbyid(c.relowner)::text,
	   c.relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user),
	   (SELECT count(*) FROM pg_trigger g WHERE g.tgrelid = c.oid AND NOT g.tgisinternal),
	   (SELECT count(*) FROM pg_rewrite r WHERE r.ev_class = c.oid AND r.rulename <> '_RETURN'),
	   (SELECT count(*) FROM pg_policy p WHERE p.polrelid = c.oid),
	   c.relrowsecurity
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname = ANY (current_schemas(false))
	  AND (c.relname = $1 OR c.relname = $2 OR starts_with(c.relname, $1 || '_synapse_'))
	ORDER BY c.relname`
	rows, err := conn.Query(ctx, q, table, StateTable)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (reusedTable, error) {
		var t reusedTable
		err := r.Scan(&t.name, &t.owner, &t.mine, &t.triggers, &t.rules, &t.policies, &t.rowSecurity)
		return t, err
	})
}

// checkReused refuses a table synapse reuses that is not the connecting
// role's, or has a trigger, a rule or a row-level security policy on it.
func (t *Target) checkReused(ctx context.Context, conn *pgx.Conn) error {
	tables, err := reusedTables(ctx, conn, t.Table)
	if err != nil {
		return t.wrap("check the tables' owners", err)
	}
	for _, r := range tables {
		if !r.mine {
			return fmt.Errorf("%w: %s: table %s is owned by role %s, not the role this run connects as: synapse reuses it (its checkpoints, staging and output), "+
				"so it must be yours; another role's table could run her triggers as you. Use a schema only you can create in (options=-csearch_path%%3DSCHEMA in the URL), "+
				"or have it dropped", ErrRefused, t, r.name, r.owner)
		}
		var on []string
		for _, x := range []struct {
			n    int64
			what string
		}{{r.triggers, "trigger"}, {r.rules, "rule"}, {r.policies, "row-level security policy"}} {
			if x.n > 0 {
				on = append(on, fmt.Sprintf("%d %s(s)", x.n, x.what))
			}
		}
		if r.rowSecurity && r.policies == 0 {
			on = append(on, "row-level security enabled")
		}
		if len(on) > 0 {
			return fmt.Errorf("%w: %s: table %s has %s on it: synapse writes it as its own and runs nothing else there; drop them, or write another table (?table=)",
				ErrRefused, t, r.name, strings.Join(on, ", "))
		}
	}
	return nil
}

// dependents are the views and materialized views that read table.
func dependents(ctx context.Context, conn *pgx.Conn, table string) ([]string, error) {
	const q = `SELECT DISTINCT v.relname::text || CASE v.relkind WHEN 'm' THEN ' (materialized view)' ELSE ' (view)' END
	FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid JOIN pg_class v ON v.oid = r.ev_class
	WHERE d.classid = 'pg_rewrite'::regclass AND d.refobjid = to_regclass($1) AND v.oid <> d.refobjid
	ORDER BY 1`
	rows, err := conn.Query(ctx, q, pgx.Identifier{table}.Sanitize())
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// checkDependents refuses to replace a table that views depend on: the
// publish drops it, which PostgreSQL refuses while they exist, after the
// whole run. --sync keeps the table and writes into it.
func (t *Target) checkDependents(ctx context.Context, conn *pgx.Conn) error {
	views, err := dependents(ctx, conn, t.Table)
	if err != nil {
		return t.wrap("check the views on the table", err)
	}
	if len(views) > 0 {
		return fmt.Errorf("%w: %s: %s depend(s) on table %s, which a run replaces (drops, then renames its new table into place): "+
			"PostgreSQL would refuse the drop after the whole run. Run with --sync, which keeps the table and changes its rows, or drop the views first",
			ErrRefused, t, strings.Join(views, ", "), t.Table)
	}
	return nil
}
