package engine

// MaxPayloadBytes is the engine's payload limit (Limits.MaxPayloadBytes,
// defaults applied). The HTTP transport reports a request too large to
// read against it (httpapi.Options.MaxPayloadBytes).
func (e *Engine) MaxPayloadBytes() int { return e.m.Limits.MaxPayloadBytes }
