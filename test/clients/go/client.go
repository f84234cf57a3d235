package main

// The HTTP side: net/http's default Client, bodies from encoding/json, the scope headers and,
// when secrets are given, the signature-mode token of docs/auth.md on every request.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Credential says which secret signs a request: the app's, or the internal one the internal
// script endpoints want.
type Credential int

const (
	AppToken Credential = iota
	InternalToken
)

type Client struct {
	BaseURL        string
	App            string
	Space          string
	User           string
	AppSecret      string
	InternalSecret string
}

// Reply is one answer: HTTP status, headers and the whole body.
type Reply struct {
	StatusCode int
	Header     http.Header
	Body       []byte
}

// Token is docs/auth.md, "Token": unixSeconds "." hex HMAC-SHA256 of app, space, user and the time.
func (c *Client) Token(secret string) string {
	now := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(c.App + "\n" + c.Space + "\n" + c.User + "\n" + now))
	return now + "." + hex.EncodeToString(mac.Sum(nil))
}

func (c *Client) do(method, path string, query url.Values, contentType string, body []byte, cred Credential) (*Reply, error) {
	u := strings.TrimRight(c.BaseURL, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("app", c.App)
	req.Header.Set("space", c.Space)
	req.Header.Set("user", c.User)
	secret := c.AppSecret
	if cred == InternalToken {
		secret = c.InternalSecret
	}
	if secret != "" {
		req.Header.Set("token", c.Token(secret))
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	return &Reply{StatusCode: res.StatusCode, Header: res.Header, Body: b}, nil
}

func (c *Client) PostJSON(path string, query url.Values, body any, cred Credential) (*Reply, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return c.do(http.MethodPost, path, query, "application/json", b, cred)
}

func (c *Client) Get(path string, query url.Values, cred Credential) (*Reply, error) {
	return c.do(http.MethodGet, path, query, "", nil, cred)
}

// Upload sends files as batchFile parts with mime/multipart (CreateFormFile: each part is
// application/octet-stream) and the text fields after them.
func (c *Client) Upload(path string, files []string, fields map[string]string, cred Credential) (*Reply, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		part, err := w.CreateFormFile("batchFile", filepath.Base(name))
		if err != nil {
			return nil, err
		}
		if _, err := part.Write(data); err != nil {
			return nil, err
		}
	}
	for k, v := range fields {
		if err := w.WriteField(k, v); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return c.do(http.MethodPost, path, nil, w.FormDataContentType(), buf.Bytes(), cred)
}

// strict reads JSON into v and fails on a field v does not declare, or on anything after it.
func strict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("more than one JSON value")
	}
	return nil
}
