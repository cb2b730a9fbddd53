package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// tool is a migration tool whose version table this program reads.
type tool struct {
	name string
	// table and schema are where the tool keeps its version by default ("" schema: the
	// search_path).
	table, schema string
	// read reads the version from the table at where, in a read-only transaction.
	read func(ctx context.Context, q querier, where target) (state, error)
}

// tools by name; each reader is in a file of its own.
var tools = map[string]tool{
	"golang-migrate": {name: "golang-migrate", table: "schema_migrations", read: readGolangMigrate},
	"goose":          {name: "goose", table: "goose_db_version", read: readGoose},
	"flyway":         {name: "flyway", table: "flyway_schema_history", read: readFlyway},
	"atlas":          {name: "atlas", table: "atlas_schema_revisions", schema: "atlas_schema_revisions", read: readAtlas},
	"liquibase":      {name: "liquibase", table: "databasechangelog", read: readLiquibase},
}

// toolOrder is the order tools are listed in messages.
var toolOrder = []string{"golang-migrate", "goose", "flyway", "atlas", "liquibase"}

func toolNames() string { return strings.Join(toolOrder, ", ") }

// target says where a tool's table is.
type target struct {
	schema    string // "" for the search_path
	table     string
	lockTable string // liquibase's lock table
}

// state is what a reader found.
type state struct {
	// Version is a dotted numeric version; "0" when nothing is recorded.
	Version string
	Dirty   bool
	// Notes explain the state (no table, why dirty); printed to stderr.
	Notes []string
}

// querier is what readers query through (a pgx.Tx).
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// table is a table found in the database.
type table struct {
	ident  string // quoted, schema-qualified, for SQL
	name   string // schema.table, for messages
	schema string // the schema it is in
}

// findTable looks table up in schema, or on the search_path when schema is "". Names are
// case-sensitive, as stored. ok is false when there is no such table.
func findTable(ctx context.Context, q querier, schema, name string) (t table, ok bool, err error) {
	ident := pgx.Identifier{name}
	if schema != "" {
		ident = pgx.Identifier{schema, name}
	}
	var nsp, rel string
	err = q.QueryRow(ctx, `SELECT n.nspname, c.relname
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.oid = pg_catalog.to_regclass($1)`, ident.Sanitize()).Scan(&nsp, &rel)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return table{}, false, nil
	case err != nil:
		return table{}, false, fmt.Errorf("looking up the table %s: %w", where(schema, name), err)
	}
	return table{ident: pgx.Identifier{nsp, rel}.Sanitize(), name: nsp + "." + rel, schema: nsp}, true, nil
}

// where names a table for a message.
func where(schema, name string) string {
	if schema == "" {
		return name + " (on the search_path)"
	}
	return schema + "." + name
}

// noTable is the state of a database without the tool's table: nothing migrated yet.
func noTable(schema, name string) state {
	return state{Version: "0", Notes: []string{fmt.Sprintf("no table %s: reporting version 0 (nothing migrated yet; check --table and --schema if that is wrong)", where(schema, name))}}
}

// checkVersion returns an error naming v when it is not a dotted numeric version.
func checkVersion(v, what string) error {
	if !schemaversion.Valid(v) {
		return fmt.Errorf("%s %q is not a dotted numeric version (digits joined by dots, like 2 or 2026.10.1), so it cannot be reported", what, v)
	}
	return nil
}

// higher reports whether version a is above b (both valid; "" is below everything).
func higher(a, b string) bool {
	c, err := schemaversion.Compare(a, b)
	return err == nil && c > 0
}
