package agent

import (
	"encoding/json"
	"reflect"
	"strings"

	"github.com/invopop/jsonschema"
)

// fullDescriptionsChange versions the tools' schemas with whole
// descriptions: a run whose history recorded schemas with descriptions cut
// at their first comma keeps sending those (New asks sdk.GetVersion only
// when a tool's two schemas differ).
const fullDescriptionsChange = "cairn.agent.full-tool-descriptions"

// inputSchemas derives the JSON schema of a tool's input type, with the
// fields' descriptions whole (fullDescriptions), and as versions before
// fullDescriptionsChange derived it (cut at the first comma).
func inputSchemas(t reflect.Type) (schema, legacy string, err error) {
	r := jsonschema.Reflector{Anonymous: true, DoNotReference: true, ExpandedStruct: true}
	s := r.ReflectFromType(t)
	s.Version = ""
	b, err := json.Marshal(s)
	if err != nil {
		return "", "", err
	}
	legacy = string(b)
	fullDescriptions(t, s, 0)
	if b, err = json.Marshal(s); err != nil {
		return "", "", err
	}
	return string(b), legacy, nil
}

// maxSchemaDepth bounds fullDescriptions' walk (a recursive type).
const maxSchemaDepth = 32

// fullDescriptions gives every property of s the whole description its
// field's `jsonschema:"description=…"` tag holds. invopop/jsonschema
// splits that tag at every comma, so "description=The invoice id, e.g.
// INV-9" would describe the field as "The invoice id": here the
// description runs on to the next part that is a keyword (tagDescription).
// t is the Go type s was derived from.
func fullDescriptions(t reflect.Type, s *jsonschema.Schema, depth int) {
	if s == nil || depth > maxSchemaDepth {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		fullDescriptions(t.Elem(), s.Items, depth+1)
	case reflect.Map:
		fullDescriptions(t.Elem(), s.AdditionalProperties, depth+1)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			fieldDescription(t.Field(i), s, depth)
		}
	}
}

// fieldDescription applies fullDescriptions to one field of a struct whose
// schema is s.
func fieldDescription(f reflect.StructField, s *jsonschema.Schema, depth int) {
	jsonTag := strings.Split(f.Tag.Get("json"), ",")
	name := jsonTag[0]
	switch {
	case name == "-" && len(jsonTag) == 1:
		return
	case f.Anonymous && name == "":
		fullDescriptions(f.Type, s, depth+1) // inlined, as encoding/json does
		return
	case !f.IsExported():
		return
	case name == "":
		name = f.Name
	}
	if s.Properties == nil {
		return
	}
	prop, ok := s.Properties.Get(name)
	if !ok || prop == nil {
		return
	}
	if d, ok := tagDescription(f.Tag.Get("jsonschema")); ok {
		prop.Description = d
	}
	fullDescriptions(f.Type, prop, depth+1)
}

// tagDescription returns the description a jsonschema tag gives: from
// "description=" to the next part that is a keyword ("minimum=1",
// "required"), commas included. A part is a keyword when it starts with
// a name made of letters and underscores, followed by "=" or nothing;
// "e.g. INV-9" and " in cents" are not.
func tagDescription(tag string) (string, bool) {
	parts := splitTag(tag)
	for i, p := range parts {
		d, ok := strings.CutPrefix(p, "description=")
		if !ok {
			continue
		}
		for _, q := range parts[i+1:] {
			if isTagKeyword(q) {
				break
			}
			d += "," + q
		}
		return d, true
	}
	return "", false
}

// splitTag splits a jsonschema tag at its commas, except those escaped
// with a backslash (as invopop/jsonschema does).
func splitTag(tag string) []string {
	var out []string
	for _, p := range strings.Split(tag, ",") {
		if n := len(out); n > 0 && strings.HasSuffix(out[n-1], `\`) {
			out[n-1] = strings.TrimSuffix(out[n-1], `\`) + "," + p
			continue
		}
		out = append(out, p)
	}
	return out
}

// tagFlags are the jsonschema tag's keywords that take no value.
var tagFlags = []string{"required", "nullable", "uniqueItems", "readOnly", "writeOnly", "deprecated"}

// isTagKeyword reports whether a part of a jsonschema tag is a keyword
// (see tagDescription).
func isTagKeyword(p string) bool {
	name, _, hasValue := strings.Cut(p, "=")
	if name == "" {
		return false
	}
	for _, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	if hasValue {
		return true
	}
	for _, f := range tagFlags {
		if name == f {
			return true
		}
	}
	return false
}
