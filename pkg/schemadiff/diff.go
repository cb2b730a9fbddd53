package schemadiff

import (
	"maps"
	"slices"
	"sort"
	"strings"
)

// Diff compares two captures of one database, before and after a migration, and returns each
// difference classified, the worst first (then by table, column and kind).
func Diff(before, after *Catalog) []Change {
	var out []Change
	for oid, b := range before.Relations {
		a := after.Relations[oid]
		if a == nil {
			out = append(out, Change{Class: Breaking, Kind: TableDropped, Table: b.QualifiedName(), Why: "a binary that reads or writes it fails"})
			continue
		}
		out = append(out, diffRelation(b, a)...)
	}
	for oid, a := range after.Relations {
		if before.Relations[oid] == nil {
			out = append(out, Change{Class: Expand, Kind: TableAdded, Table: a.QualifiedName()})
		}
	}
	out = append(out, diffEnums(before, after)...)
	if len(out) == 0 && before.ToolState != nil && after.ToolState != nil && maps.Equal(before.ToolState, after.ToolState) {
		// A migration that ran and left no trace: it may have run, but elsewhere.
		out = append(out, Change{Class: Conditional, Kind: NothingChanged,
			Why: "the migration changed neither the schema nor its tool's version table here: one that reads its database's address from elsewhere than the probe's variable ran on that database"})
	}
	sortChanges(out)
	return out
}

func diffRelation(b, a *Relation) []Change {
	var out []Change
	name := a.QualifiedName()
	if b.QualifiedName() != name {
		out = append(out, Change{Class: Breaking, Kind: TableRenamed, Table: b.QualifiedName(), From: b.QualifiedName(), To: name, Why: "a binary that names it by its old name fails"})
	}
	if b.ViewDef != a.ViewDef {
		out = append(out, Change{Class: Conditional, Kind: ViewChanged, Table: name, From: oneLine(b.ViewDef), To: oneLine(a.ViewDef)})
	}
	cols, columnsMoved := diffColumns(name, b, a)
	// The definitions of its constraints and indexes name the table and its columns: when those
	// moved, they change with them, which is not reported again.
	columnsMoved = columnsMoved || b.QualifiedName() != name
	rewritten := b.FileNode != 0 && a.FileNode != 0 && b.FileNode != a.FileNode && a.Kind != 'v'
	marked := false
	for i := range cols {
		if rewritten && cols[i].Kind == ColumnType {
			cols[i].Rewrite, marked = true, true
		}
	}
	out = append(out, cols...)
	if rewritten && !marked {
		out = append(out, Change{Class: Expand, Kind: TableRewritten, Table: name, Rewrite: true})
	}
	out = append(out, diffTriggers(name, b, a)...)
	out = append(out, diffConstraints(name, b, a, columnsMoved)...)
	out = append(out, diffIndexes(name, b, a, columnsMoved)...)
	return out
}

// diffColumns compares a relation's columns by attribute number. moved is true when a column
// was renamed, dropped or retyped (the definitions of its constraints and indexes then change
// with it, which is not reported again).
func diffColumns(table string, b, a *Relation) (out []Change, moved bool) {
	addedByName := map[string]*Column{}
	for num, ac := range a.Columns {
		if b.Columns[num] == nil {
			addedByName[ac.Name] = ac
		}
	}
	for num, bc := range b.Columns {
		ac := a.Columns[num]
		if ac == nil {
			moved = true
			if re := addedByName[bc.Name]; re != nil {
				delete(addedByName, bc.Name)
				out = append(out, Change{Class: Breaking, Kind: ColumnReplaced, Table: table, Column: bc.Name, From: bc.Type, To: re.Type,
					Why: "dropped and added again, not altered: its values are gone"})
				continue
			}
			out = append(out, Change{Class: Breaking, Kind: ColumnDropped, Table: table, Column: bc.Name, From: bc.Type, Why: "a binary that reads or writes it fails"})
			continue
		}
		if bc.Name != ac.Name {
			moved = true
			out = append(out, Change{Class: Breaking, Kind: ColumnRenamed, Table: table, Column: bc.Name, From: bc.Name, To: ac.Name, Why: "a binary that names it by its old name fails"})
		}
		if bc.Type != ac.Type {
			moved = true
			class, why := typeChange(bc.Type, ac.Type)
			out = append(out, Change{Class: class, Kind: ColumnType, Table: table, Column: ac.Name, From: bc.Type, To: ac.Type, Why: why})
		}
		switch {
		case !bc.NotNull && ac.NotNull:
			out = append(out, Change{Class: Conditional, Kind: ColumnNotNull, Table: table, Column: ac.Name, Why: "a binary that writes NULL there fails"})
		case bc.NotNull && !ac.NotNull:
			out = append(out, Change{Class: Conditional, Kind: ColumnNullable, Table: table, Column: ac.Name, Why: "a binary may now read NULL there"})
		}
		if bc.Default != ac.Default {
			out = append(out, Change{Class: Conditional, Kind: ColumnDefault, Table: table, Column: ac.Name, From: bc.Default, To: ac.Default, Why: "a row written without it gets another value"})
		}
	}
	filled := ""
	for name, tg := range a.Triggers {
		if tg.FillsInserts && (filled == "" || name < filled) {
			filled = name
		}
	}
	for _, ac := range addedByName {
		c := Change{Class: Expand, Kind: ColumnAdded, Table: table, Column: ac.Name, To: ac.Type}
		if ac.NotNull && ac.Default == "" && ac.Generated == 0 && b.Kind != 'v' && b.Kind != 'm' {
			c.Class, c.Why = Breaking, "NOT NULL without a default: a binary that inserts rows without it fails"
			if filled != "" {
				c.Class, c.Why = Conditional, "NOT NULL without a default: the BEFORE INSERT trigger "+filled+" must fill it for a binary that inserts rows without it"
			}
		}
		out = append(out, c)
	}
	return out, moved
}

func diffTriggers(table string, b, a *Relation) []Change {
	var out []Change
	for name, bt := range b.Triggers {
		if at, ok := a.Triggers[name]; !ok {
			out = append(out, Change{Class: Conditional, Kind: TriggerDropped, Table: table, Column: name, From: bt.Def, Why: "what it did for every writer is no longer done"})
		} else if at.Def != bt.Def {
			out = append(out, Change{Class: Conditional, Kind: TriggerChanged, Table: table, Column: name, From: bt.Def, To: at.Def})
		}
	}
	for name, at := range a.Triggers {
		if _, ok := b.Triggers[name]; !ok {
			out = append(out, Change{Class: Conditional, Kind: TriggerAdded, Table: table, Column: name, To: at.Def, Why: "it acts on every writer's rows"})
		}
	}
	return out
}

func diffConstraints(table string, b, a *Relation, columnsMoved bool) []Change {
	var out []Change
	for name, bk := range b.Constraints {
		if bk.Type == 'n' {
			continue // NOT NULL, reported with its column
		}
		ak, ok := a.Constraints[name]
		switch {
		case !ok:
			out = append(out, Change{Class: Expand, Kind: ConstraintDropped, Table: table, Column: name, From: bk.Def})
		case ak.Def != bk.Def && !columnsMoved:
			out = append(out, Change{Class: Conditional, Kind: ConstraintChanged, Table: table, Column: name, From: bk.Def, To: ak.Def, Why: "a write it allowed may now be refused"})
		}
	}
	for name, ak := range a.Constraints {
		if _, ok := b.Constraints[name]; ok || ak.Type == 'n' {
			continue
		}
		why := "a write it allowed may now be refused"
		if !ak.Validated {
			why += " (NOT VALID: the rows already there are not checked)"
		}
		out = append(out, Change{Class: Conditional, Kind: ConstraintAdded, Table: table, Column: name, To: ak.Def, Why: why})
	}
	return out
}

func diffIndexes(table string, b, a *Relation, columnsMoved bool) []Change {
	var out []Change
	ofConstraint := func(r *Relation, name string) bool {
		k, ok := r.Constraints[name]
		return ok && (k.Type == 'p' || k.Type == 'u' || k.Type == 'x')
	}
	for name, bi := range b.Indexes {
		ai, ok := a.Indexes[name]
		switch {
		case ofConstraint(b, name) || ofConstraint(a, name):
			// reported as its constraint
		case !ok && bi.Unique:
			out = append(out, Change{Class: Conditional, Kind: IndexDropped, Table: table, Column: name, From: bi.Def, Why: "an INSERT … ON CONFLICT on it fails"})
		case !ok:
			out = append(out, Change{Class: Expand, Kind: IndexDropped, Table: table, Column: name, From: bi.Def})
		case ai.Def != bi.Def && !columnsMoved:
			out = append(out, Change{Class: Conditional, Kind: IndexChanged, Table: table, Column: name, From: bi.Def, To: ai.Def})
		}
	}
	for name, ai := range a.Indexes {
		if _, ok := b.Indexes[name]; ok || ofConstraint(a, name) {
			continue
		}
		c := Change{Class: Expand, Kind: IndexAdded, Table: table, Column: name, To: ai.Def}
		if ai.Unique {
			c.Class, c.Why = Conditional, "a write of a duplicate it allowed is now refused"
		}
		if !ai.Valid {
			c.Why = strings.TrimPrefix(c.Why+"; ", "; ") + "left invalid (a CREATE INDEX CONCURRENTLY that failed)"
		}
		out = append(out, c)
	}
	return out
}

func diffEnums(before, after *Catalog) []Change {
	var out []Change
	for oid, b := range before.Enums {
		a := after.Enums[oid]
		bn := qualified(b.Schema, b.Name)
		if a == nil {
			out = append(out, Change{Class: Breaking, Kind: EnumDropped, Table: bn, Why: "a binary that casts to it fails"})
			continue
		}
		an := qualified(a.Schema, a.Name)
		if an != bn {
			out = append(out, Change{Class: Breaking, Kind: EnumRenamed, Table: bn, From: bn, To: an, Why: "a binary that casts to it by its old name fails"})
		}
		for _, l := range b.Labels {
			if !slices.Contains(a.Labels, l) {
				out = append(out, Change{Class: Breaking, Kind: EnumValueRemoved, Table: an, Column: l, Why: "a binary that writes it fails"})
			}
		}
		for _, l := range a.Labels {
			if !slices.Contains(b.Labels, l) {
				out = append(out, Change{Class: Conditional, Kind: EnumValueAdded, Table: an, Column: l, Why: "a binary of the schema before may read a value it does not know"})
			}
		}
	}
	for oid, a := range after.Enums {
		if before.Enums[oid] == nil {
			out = append(out, Change{Class: Expand, Kind: EnumAdded, Table: qualified(a.Schema, a.Name)})
		}
	}
	return out
}

func sortChanges(cs []Change) {
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if a.Class != b.Class {
			return a.Class.Worse(b.Class)
		}
		if a.Table != b.Table {
			return a.Table < b.Table
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		return a.Kind < b.Kind
	})
}

// oneLine folds a definition's whitespace onto one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
