package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// TableCase is one expression of a library test table with cel-go's answer.
type TableCase struct {
	Source string          `json:"source"`
	Expr   string          `json:"expr"`
	Value  json.RawMessage `json:"value,omitempty"`
	Error  string          `json:"error,omitempty"`
	Stage  string          `json:"stage,omitempty"`
}

// PrintTables reads the `expr:` fields of the test tables in dir's
// *_test.go files (k8s.io/apiserver/pkg/cel/library) and prints each
// expression with the oracle's answer, one JSON object a line, in file
// and line order.
func PrintTables(o *Oracle, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	out := json.NewEncoder(os.Stdout)
	out.SetEscapeHTML(false)
	seen := map[string]bool{}
	for _, file := range files {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			return err
		}
		var failed error
		ast.Inspect(f, func(n ast.Node) bool {
			kv, ok := n.(*ast.KeyValueExpr)
			if !ok {
				return true
			}
			key, ok := kv.Key.(*ast.Ident)
			lit, ok2 := kv.Value.(*ast.BasicLit)
			if !ok || !ok2 || key.Name != "expr" || lit.Kind != token.STRING {
				return true
			}
			expr, err := strconv.Unquote(lit.Value)
			if err != nil {
				failed = err
				return false
			}
			if seen[expr] {
				return true
			}
			seen[expr] = true
			pos := fset.Position(lit.Pos())
			c := TableCase{Source: fmt.Sprintf("%s:%d", filepath.Base(file), pos.Line), Expr: expr}
			ans := o.Eval(Case{Expr: expr})
			c.Value, c.Error, c.Stage = ans.Value, ans.Error, ans.Stage
			if err := out.Encode(c); err != nil {
				failed = err
				return false
			}
			return true
		})
		if failed != nil {
			return fmt.Errorf("%s: %w", file, failed)
		}
	}
	return nil
}
