package analyzer

import (
	"go/ast"
	"go/constant"
	"go/types"
	"strings"
	"unicode"
)

// Ent's generic builders that write existing rows.
var (
	entUpdaters = map[string]bool{"Update": true, "UpdateOne": true, "UpdateOneID": true}
	entDeleters = map[string]bool{"Delete": true, "DeleteOne": true, "DeleteOneID": true}
)

// entBuilder reports a use of a generic update builder of a fenced Ent
// entity: XClient.Update/UpdateOne/UpdateOneID, XUpdate.Modify and
// XUpdateOne.Modify (and XClient.Delete* with -delete). The Ent package is
// recognised by shape, so the analyzer does not depend on Ent.
func (b *builderState) entBuilder(se *ast.SelectorExpr) {
	name := se.Sel.Name
	upsert := name == "OnConflict" || name == "OnConflictColumns"
	if !entUpdaters[name] && name != "Modify" && !upsert && !(b.cfg.Delete && entDeleters[name]) {
		return
	}
	sel := b.info.Selections[se]
	if sel == nil {
		return
	}
	recv := sel.Recv()
	if p, ok := recv.(*types.Pointer); ok {
		recv = p.Elem()
	}
	named, ok := recv.(*types.Named)
	if !ok || named.Obj().Pkg() == nil {
		return
	}
	pkg := named.Obj().Pkg()
	if pkg == b.pkg {
		return // the generated package implements the fenced API with them
	}
	typ := named.Obj().Name()
	var entity, what string
	switch {
	case upsert && strings.HasSuffix(typ, "CreateBulk"):
		entity, what = strings.TrimSuffix(typ, "CreateBulk"), typ+"."+name
	case upsert && strings.HasSuffix(typ, "Create"):
		entity, what = strings.TrimSuffix(typ, "Create"), typ+"."+name
	case upsert:
		return
	case name == "Modify" && strings.HasSuffix(typ, "UpdateOne"):
		entity, what = strings.TrimSuffix(typ, "UpdateOne"), typ+".Modify"
	case name == "Modify" && strings.HasSuffix(typ, "Update"):
		entity, what = strings.TrimSuffix(typ, "Update"), typ+".Modify"
	case name != "Modify" && strings.HasSuffix(typ, "Client"):
		entity = strings.TrimSuffix(typ, "Client")
		what = entity + "." + name
	default:
		return
	}
	if entity == "" || !isEntEntity(pkg, entity) {
		return
	}
	table := entTable(pkg, entity)
	if b.cfg.Table(table) == nil {
		return
	}
	if upsert {
		b.host.add(se.Sel.Pos(), what+" makes an upsert, which writes existing "+table+" rows and cannot be fenced: enqueue with "+
			entity+"Client.Create alone, and change a row through the fenced API (a "+entity+"Lease from Claim/Takeover, applied with "+
			entity+"Client.Apply)")
		return
	}
	b.host.add(se.Sel.Pos(), entMessage(what, entity, table))
}

func entMessage(what, entity, table string) string {
	return what + " bypasses the fence on " + table + ": write through the fenced API (a " + entity +
		"Lease from Claim/Takeover, applied with " + entity + "Client.Apply)"
}

// isEntEntity reports whether pkg has Ent's generated types for entity.
func isEntEntity(pkg *types.Package, entity string) bool {
	for _, suffix := range []string{"Client", "Update", "UpdateOne", "Mutation"} {
		if _, ok := pkg.Scope().Lookup(entity + suffix).(*types.TypeName); !ok {
			return false
		}
	}
	return true
}

// entTable resolves an entity's table: the fenced extension's
// <Entity>FencedTable constant, else Ent's default naming.
func entTable(pkg *types.Package, entity string) string {
	if k, ok := pkg.Scope().Lookup(entity + "FencedTable").(*types.Const); ok && k.Val().Kind() == constant.String {
		return strings.ToLower(constant.StringVal(k.Val()))
	}
	return pluralize(snake(entity))
}

// snake is Ent's snake_case of a Go type name (entc/gen).
func snake(s string) string {
	var b strings.Builder
	j := 0
	for i := 0; i < len(s); i++ {
		r := rune(s[i])
		if i > 0 && i < len(s)-1 && unicode.IsUpper(r) {
			if unicode.IsLower(rune(s[i-1])) ||
				j != i-1 && unicode.IsLower(rune(s[i+1])) && unicode.IsLetter(rune(s[i-1])) {
				j = i
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// pluralize covers the regular English rules Ent's inflector applies to
// table names; irregular names should declare <Entity>FencedTable.
func pluralize(s string) string {
	switch {
	case strings.HasSuffix(s, "s"), strings.HasSuffix(s, "x"), strings.HasSuffix(s, "z"),
		strings.HasSuffix(s, "ch"), strings.HasSuffix(s, "sh"):
		return s + "es"
	case len(s) > 1 && s[len(s)-1] == 'y' && !strings.ContainsRune("aeiou", rune(s[len(s)-2])):
		return s[:len(s)-1] + "ies"
	}
	return s + "s"
}
