package main

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
)

// BenchmarkGroups evaluates the expressions of benches/data/cel-groups.json
// over its object, as katalog's `cel` benchmark does: the programs compiled
// once, the object converted once (warm), one op is one evaluation.
//
//	cd testenv/celoracle && go test -run '^$' -bench . -benchtime 2s
func BenchmarkGroups(b *testing.B) {
	text, err := os.ReadFile("../../benches/data/cel-groups.json")
	if err != nil {
		b.Fatal(err)
	}
	var data struct {
		Object json.RawMessage `json:"object"`
		Groups []struct {
			Name  string   `json:"name"`
			Exprs []string `json:"exprs"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(text, &data); err != nil {
		b.Fatal(err)
	}
	oracle, err := NewOracle(false)
	if err != nil {
		b.Fatal(err)
	}
	vars, err := Bind(map[string]json.RawMessage{"object": data.Object})
	if err != nil {
		b.Fatal(err)
	}
	activation, err := cel.NewActivation(vars)
	if err != nil {
		b.Fatal(err)
	}
	for _, group := range data.Groups {
		var programs []cel.Program
		for _, expr := range group.Exprs {
			prg, err := oracle.Program(expr)
			if err != nil {
				b.Fatalf("%s: %v", expr, err)
			}
			out, _, err := prg.Eval(activation)
			if err != nil || out != types.True {
				b.Fatalf("%s: %v %v, want true", expr, out, err)
			}
			programs = append(programs, prg)
		}
		b.Run("cel_"+group.Name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if out, _, _ := programs[i%len(programs)].Eval(activation); out != types.True {
					b.Fatal("not true")
				}
			}
		})
	}
}
