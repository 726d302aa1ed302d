package api

// The HTTP binding of the contract, shared by the server (engine/httpapi)
// and the remote client (sdk/client.Dial): every method is
// POST HTTPPrefix + method name, with a msgpack or JSON body of its request
// type, answered with its response type or an ErrorBody.
const (
	// HTTPPrefix is the path prefix of every method.
	HTTPPrefix = "/api/v1/"
	// ContentMsgpack is the content type workers use.
	ContentMsgpack = "application/msgpack"
	// ContentJSON is the content type for people and curl.
	ContentJSON = "application/json"
)

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}
