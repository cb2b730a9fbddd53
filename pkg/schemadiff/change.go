package schemadiff

import "fmt"

// Class says whether a binary written for the schema before a change can still run on the schema
// after it.
type Class string

const (
	// Expand: binaries of the schema before keep working (a new table, a nullable column, a
	// widened type, a non-unique index).
	Expand Class = "expand"
	// Conditional: depends on what the application does (a new constraint, a changed default,
	// a new enum value, NOT NULL set on a column).
	Conditional Class = "conditional"
	// Breaking: a binary of the schema before fails on the schema after (a dropped or renamed
	// table or column, an incompatible type change, a NOT NULL column without a default).
	Breaking Class = "breaking"
	// Failed: the migration itself failed (on the scratch database; production untouched).
	Failed Class = "failed"
)

// rank orders the classes by how much they hold: the worst change decides a report's verdict.
func (c Class) rank() int {
	switch c {
	case Expand:
		return 1
	case Conditional:
		return 2
	case Breaking:
		return 3
	case Failed:
		return 4
	}
	return 0
}

// Worse reports whether c holds more than d.
func (c Class) Worse(d Class) bool { return c.rank() > d.rank() }

// Kind names what changed.
type Kind string

const (
	TableAdded         Kind = "table-added"
	TableDropped       Kind = "table-dropped"
	TableRenamed       Kind = "table-renamed"
	TableRewritten     Kind = "table-rewritten"
	ViewChanged        Kind = "view-changed"
	ColumnAdded        Kind = "column-added"
	ColumnDropped      Kind = "column-dropped"
	ColumnRenamed      Kind = "column-renamed"
	ColumnReplaced     Kind = "column-dropped-and-added"
	ColumnType         Kind = "column-type"
	ColumnNotNull      Kind = "column-not-null"
	ColumnNullable     Kind = "column-nullable"
	ColumnDefault      Kind = "column-default"
	ConstraintAdded    Kind = "constraint-added"
	ConstraintDropped  Kind = "constraint-dropped"
	ConstraintChanged  Kind = "constraint-changed"
	IndexAdded         Kind = "index-added"
	IndexDropped       Kind = "index-dropped"
	IndexChanged       Kind = "index-changed"
	TriggerAdded       Kind = "trigger-added"
	TriggerDropped     Kind = "trigger-dropped"
	TriggerChanged     Kind = "trigger-changed"
	EnumAdded          Kind = "enum-added"
	EnumDropped        Kind = "enum-dropped"
	EnumRenamed        Kind = "enum-renamed"
	EnumValueAdded     Kind = "enum-value-added"
	EnumValueRemoved   Kind = "enum-value-removed"
	MigrationFailed    Kind = "migration-failed"
	MigrationToolDirty Kind = "migration-dirty"
	// NothingChanged: neither the schema nor a migration tool's table changed (Diff).
	NothingChanged Kind = "nothing-changed"
)

// Change is one difference between two captures, classified.
type Change struct {
	Class Class `json:"class"`
	Kind  Kind  `json:"kind"`
	// Table is the relation (schema.name, public left out), or the enum type.
	Table string `json:"table,omitempty"`
	// Column is the column, or the constraint, index or enum value, the change is about.
	Column string `json:"column,omitempty"`
	// From and To are what it was and is (a type, a name, a default, a definition).
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// Rewrite is true when the change rewrote the table (every row copied under an exclusive
	// lock): safe for old binaries, not for a large table's availability.
	Rewrite bool `json:"rewrite,omitempty"`
	// Why says, in a sentence, what it means for a binary of the schema before.
	Why string `json:"why,omitempty"`
}

// String is the change on one line: "breaking column-type routes.target: text → json (...)".
func (c Change) String() string {
	s := fmt.Sprintf("%s %s", c.Class, c.Kind)
	switch {
	case c.Table != "" && c.Column != "":
		s += " " + c.Table + "." + c.Column
	case c.Table != "" || c.Column != "":
		s += " " + c.Table + c.Column
	}
	switch {
	case c.From != "" && c.To != "":
		s += ": " + c.From + " → " + c.To
	case c.From != "":
		s += ": was " + c.From
	case c.To != "":
		s += ": " + c.To
	}
	if c.Rewrite {
		s += " [rewrites the table]"
	}
	if c.Why != "" {
		s += " (" + c.Why + ")"
	}
	return s
}
