package fakellm

import (
	"errors"
	"net/http"
)

// PLACEHOLDER: replaced by the Gemini fake.

// ParseGemini parses a Gemini generateContent request body.
func ParseGemini(body []byte) (*Request, error) { return nil, errors.New("gemini: not implemented") }

// GeminiModel returns the model id of a .../models/{model}:method path.
func GeminiModel(path string) string { return "" }

func (s *Server) checkGemini(req *Request, rec *Recorded) *APIError { return nil }
func (s *Server) mintGemini(req *Request, rec *Recorded)            {}
func (e encoder) geminiStream(w http.ResponseWriter, rec *Recorded) {}
