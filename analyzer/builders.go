package analyzer

import (
	"go/ast"
	"go/types"
)

type builderUse struct{}

func (c *checker) builderCall(call *ast.CallExpr, fn *types.Func, stack []ast.Node) {}

func (c *checker) judgeBuilders() {}
