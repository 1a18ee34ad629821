// Command house measures how den's code is laid out: lines per package,
// imports that climb from a lower layer to a higher one, and, inside the
// sandbox core, how its files call each other and how far one create's
// call reaches. Issue 28 asked for these figures before and after the
// sandbox domain was cut by capability; docs/architecture.md names the
// layers this command checks.
//
// Run it from the repository's root with scripts/house-measure.sh. It is
// its own module so that den's go.mod does not carry golang.org/x/tools.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"
)

const module = "github.com/den-dev/den/"

func main() {
	dir := flag.String("dir", "../..", "the repository's root (go run -C tools/house runs in tools/house)")
	edges := flag.Bool("edges", false, "also list the core's file-to-file call edges")
	check := flag.Bool("check", false, "only check the layers: fail on an import that climbs or a package no layer names")
	flag.Parse()
	var err error
	if *check {
		err = checkLayers(*dir)
	} else {
		err = run(*dir, *edges)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "house:", err)
		os.Exit(1)
	}
}

func run(dir string, listEdges bool) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	cfg := &packages.Config{
		Dir:  abs,
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedImports | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo,
	}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		return fmt.Errorf("loading den's packages: %w", err)
	}
	var broken []string
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			broken = append(broken, e.Error())
		}
	})
	if len(broken) > 0 {
		return fmt.Errorf("den does not build:\n%s", strings.Join(broken, "\n"))
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].PkgPath < pkgs[j].PkgPath })

	if err := packageSizes(pkgs); err != nil {
		return err
	}
	if err := climbingImports(pkgs); err != nil {
		return err
	}
	g := buildCallGraph(pkgs)
	coreFiles(g, listEdges)
	createReach(g)
	return nil
}

// checkLayers loads only the import graph, which takes seconds, so that
// `make test` can keep the layers as they are.
func checkLayers(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	pkgs, err := packages.Load(&packages.Config{Dir: abs, Mode: packages.NeedName | packages.NeedImports}, "./...")
	if err != nil {
		return fmt.Errorf("loading den's packages: %w", err)
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].PkgPath < pkgs[j].PkgPath })
	return climbingImports(pkgs)
}

func short(path string) string { return strings.TrimPrefix(path, module) }

// packageSizes prints each package's non-test lines and files, largest
// first, generated code apart.
func packageSizes(pkgs []*packages.Package) error {
	type size struct {
		pkg          string
		lines, files int
		generated    bool
	}
	var sizes []size
	for _, p := range pkgs {
		s := size{pkg: short(p.PkgPath)}
		for i, f := range p.GoFiles {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			s.lines += strings.Count(string(b), "\n")
			s.files++
			if i < len(p.Syntax) && ast.IsGenerated(p.Syntax[i]) {
				s.generated = true
			}
		}
		sizes = append(sizes, s)
	}
	sort.SliceStable(sizes, func(i, j int) bool { return sizes[i].lines > sizes[j].lines })
	fmt.Println("== lines per package (non-test .go files)")
	for _, s := range sizes {
		note := ""
		switch {
		case s.generated:
			note = "  (generated)"
		case s.lines > 6000:
			note = "  over ~6k"
		}
		fmt.Printf("%7d lines %3d files  %s%s\n", s.lines, s.files, s.pkg, note)
	}
	return nil
}

// climbingImports prints every import from a package to one in a higher
// layer, and every package no layer names.
func climbingImports(pkgs []*packages.Package) error {
	fmt.Println("\n== imports that climb from a lower layer to a higher one")
	climbs, unplaced := 0, 0
	for _, p := range pkgs {
		from, ok := layerOf(short(p.PkgPath))
		if !ok {
			fmt.Printf("  unplaced: %s (give it a line in tools/house/layers.go)\n", short(p.PkgPath))
			unplaced++
			continue
		}
		for path := range p.Imports {
			if !strings.HasPrefix(path, module) {
				continue
			}
			to, ok := layerOf(short(path))
			if ok && to.rank > from.rank {
				fmt.Printf("  %s (%s) imports %s (%s)\n", short(p.PkgPath), from.name, short(path), to.name)
				climbs++
			}
		}
	}
	fmt.Printf("climbing imports: %d; unplaced packages: %d\n", climbs, unplaced)
	if climbs > 0 || unplaced > 0 {
		return fmt.Errorf("%d imports climb and %d packages have no layer: see docs/architecture.md", climbs, unplaced)
	}
	return nil
}

// callGraph is den's functions and which call which, resolved by type:
// a call through an interface ends at the interface's method.
type callGraph struct {
	calls map[*types.Func][]*types.Func
	file  map[*types.Func]string // the file declaring each function, relative to the module
	pkg   map[*types.Func]string
}

func buildCallGraph(pkgs []*packages.Package) *callGraph {
	g := &callGraph{calls: map[*types.Func][]*types.Func{}, file: map[*types.Func]string{}, pkg: map[*types.Func]string{}}
	for _, p := range pkgs {
		for _, f := range p.Syntax {
			name := p.Fset.Position(f.Pos()).Filename
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok {
					continue
				}
				fn, ok := p.TypesInfo.Defs[fd.Name].(*types.Func)
				if !ok {
					continue
				}
				g.file[fn] = filepath.Join(short(p.PkgPath), filepath.Base(name))
				g.pkg[fn] = short(p.PkgPath)
				if fd.Body != nil {
					g.calls[fn] = calledIn(p.TypesInfo, fd.Body)
				}
			}
		}
	}
	return g
}

// calledIn lists the den functions a body names: called, or passed on as
// a value (a callback is a call that happens later).
func calledIn(info *types.Info, body *ast.BlockStmt) []*types.Func {
	seen := map[*types.Func]bool{}
	var out []*types.Func
	ast.Inspect(body, func(n ast.Node) bool {
		id, ok := n.(*ast.Ident)
		if !ok {
			return true
		}
		fn, ok := info.Uses[id].(*types.Func)
		if !ok || fn.Pkg() == nil || !strings.HasPrefix(fn.Pkg().Path(), module) {
			return true
		}
		fn = fn.Origin()
		if !seen[fn] {
			seen[fn] = true
			out = append(out, fn)
		}
		return true
	})
	return out
}

const core = "internal/sandbox"

// coreFiles prints how the core's files call each other: the edges, and
// the largest set of files that all reach each other (a cycle a reader
// cannot read in order).
func coreFiles(g *callGraph, list bool) {
	edges := map[string]map[string]bool{}
	files := map[string]bool{}
	for fn, callees := range g.calls {
		if g.pkg[fn] != core {
			continue
		}
		from := g.file[fn]
		files[from] = true
		for _, c := range callees {
			to, ok := g.file[c]
			if !ok || g.pkg[c] != core || to == from {
				continue
			}
			if edges[from] == nil {
				edges[from] = map[string]bool{}
			}
			edges[from][to] = true
		}
	}
	n := 0
	var lines []string
	for from, tos := range edges {
		for to := range tos {
			n++
			lines = append(lines, "  "+filepath.Base(from)+" -> "+filepath.Base(to))
		}
	}
	sort.Strings(lines)
	fmt.Printf("\n== the core (%s): file-to-file call edges\n", core)
	if list {
		fmt.Println(strings.Join(lines, "\n"))
	}
	big := largestCycle(edges)
	inside := 0
	for from, tos := range edges {
		for to := range tos {
			if big[from] && big[to] {
				inside++
			}
		}
	}
	fmt.Printf("files: %d; call edges between them: %d; the largest cycle: %d files holding %d of the edges\n",
		len(files), n, len(big), inside)
}

// largestCycle returns the largest strongly connected set of files
// (Tarjan's algorithm).
func largestCycle(edges map[string]map[string]bool) map[string]bool {
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var best []string
	next := 0
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for w := range edges[v] {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var scc []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			scc = append(scc, w)
			if w == v {
				break
			}
		}
		if len(scc) > len(best) {
			best = scc
		}
	}
	keys := make([]string, 0, len(edges))
	for k := range edges {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, seen := index[k]; !seen {
			visit(k)
		}
	}
	out := map[string]bool{}
	for _, f := range best {
		out[f] = true
	}
	return out
}

// createReach follows (*sandbox.Service).Create through every den
// function it may call, and prints the files reached, by package.
func createReach(g *callGraph) {
	var start *types.Func
	for fn := range g.calls {
		if g.pkg[fn] == core && fn.Name() == "Create" && recvName(fn) == "Service" {
			start = fn
		}
	}
	fmt.Println("\n== files one create passes through: (*sandbox.Service).Create and every den function it may call")
	if start == nil {
		fmt.Println("  (*sandbox.Service).Create not found")
		return
	}
	seen := map[*types.Func]bool{start: true}
	queue := []*types.Func{start}
	for len(queue) > 0 {
		fn := queue[0]
		queue = queue[1:]
		for _, c := range g.calls[fn] {
			if !seen[c] {
				seen[c] = true
				queue = append(queue, c)
			}
		}
	}
	byPkg := map[string]map[string]bool{}
	total := 0
	for fn := range seen {
		f, ok := g.file[fn]
		if !ok {
			continue // an interface's method: the call ends there
		}
		if byPkg[g.pkg[fn]] == nil {
			byPkg[g.pkg[fn]] = map[string]bool{}
		}
		if !byPkg[g.pkg[fn]][f] {
			byPkg[g.pkg[fn]][f] = true
			total++
		}
	}
	pkgs := make([]string, 0, len(byPkg))
	for p := range byPkg {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		fmt.Printf("  %3d files in %s\n", len(byPkg[p]), p)
	}
	fmt.Printf("functions: %d; files: %d; in the core: %d\n", len(seen), total, len(byPkg[core]))
}

func recvName(fn *types.Func) string {
	sig, ok := fn.Type().(*types.Signature)
	if !ok || sig.Recv() == nil {
		return ""
	}
	t := sig.Recv().Type()
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := t.(*types.Named); ok {
		return n.Obj().Name()
	}
	return ""
}
