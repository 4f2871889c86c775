// Command gofields prints how upstream JobSet's Go types hold each field of a replicated job
// (sigs.k8s.io/jobset's ReplicatedJob, with Kubernetes' JobTemplateSpec inside): which values
// they decode to the same Go value as an absent field, so that two JSON documents Kubernetes'
// semantic equality (k8s.io/apimachinery/pkg/api/equality.Semantic) calls equal can be told
// apart from two it does not. controller/api/gofields.py is its output (`make crd` writes it).
//
// A field is named "<parent>.<field>": its JSON name and the JSON name of the field holding the
// object it is in (list items are held by the list's field). Classes:
//
//	s  a scalar that is not a pointer: its zero value (false, "", 0) decodes as absence does
//	t  a struct that is not a pointer: {} (once its fields are normalized) decodes as absence
//	m  a map: {} decodes as absence (nil and empty maps are semantically equal)
//	Q  a resource.Quantity, compared by value ("1Gi" equals "1024Mi"); "<field>.*" for the
//	   values of a map of quantities
//
// Pointers (to scalars or structs), IntOrString and times are left out: present is not absent.
// Empty lists need no class: nil and empty slices are semantically equal wherever they are.
// A name that two types hold differently is left out, so it is compared exactly.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

var classes = map[string]map[string]bool{}

func note(name, class string) {
	if classes[name] == nil {
		classes[name] = map[string]bool{}
	}
	classes[name][class] = true
}

// special types: decoded from JSON by a method of their own, not field by field.
func special(t reflect.Type) string {
	switch t.Name() {
	case "Quantity", "IntOrString", "Time", "MicroTime", "RawExtension", "Duration":
		return t.Name()
	}
	return ""
}

func classify(t reflect.Type) string {
	switch {
	case t.Kind() == reflect.Ptr && special(t.Elem()) == "Quantity", special(t) == "Quantity":
		return "Q"
	case t.Kind() == reflect.Ptr, special(t) != "":
		return "" // present differs from absent; or a type with a JSON form of its own
	case t.Kind() == reflect.Struct:
		return "t"
	case t.Kind() == reflect.Map:
		return "m"
	case t.Kind() == reflect.Slice:
		return "" // empty lists are handled everywhere alike
	default:
		return "s"
	}
}

func walk(t reflect.Type, parent string, stack map[reflect.Type]bool) {
	if stack[t] {
		return
	}
	stack[t] = true
	defer delete(stack, t)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		switch {
		case name == "-":
			continue
		case name == "" && f.Anonymous, name == "" && strings.Contains(f.Tag.Get("json"), "inline"):
			walk(f.Type, parent, stack)
			continue
		case name == "":
			continue
		}
		note(parent+"."+name, classify(f.Type))
		inner := f.Type
		for inner.Kind() == reflect.Ptr || inner.Kind() == reflect.Slice || inner.Kind() == reflect.Map {
			if inner.Kind() == reflect.Map && special(inner.Elem()) == "Quantity" {
				note(name+".*", "Q")
			}
			inner = inner.Elem()
		}
		if inner.Kind() == reflect.Struct && special(inner) == "" {
			walk(inner, name, stack)
		}
	}
}

func main() {
	walk(reflect.TypeOf(jobset.ReplicatedJob{}), "replicatedJobs", map[reflect.Type]bool{})
	out := map[string]string{}
	for name, seen := range classes {
		if len(seen) == 1 {
			for class := range seen {
				if class != "" {
					out[name] = class
				}
			}
		}
	}
	names := make([]string, 0, len(out))
	for name := range out {
		names = append(names, name)
	}
	sort.Strings(names)
	ordered := make([][2]string, 0, len(names))
	for _, name := range names {
		ordered = append(ordered, [2]string{name, out[name]})
	}
	encoded, err := json.Marshal(ordered)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(string(encoded))
}
