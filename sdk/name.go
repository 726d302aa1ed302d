package sdk

// TypeName returns the workflow or activity type name for fn: a string is
// used as it is; a function gives its name without package path and package
// ("PayInvoice"). Clients use it to name workflows by function.
func TypeName(fn any) string {
	if s, ok := fn.(string); ok {
		return s
	}
	return funcName(fn)
}
