package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
)

// maxAnswer bounds the answer to a call between nodes.
const maxAnswer = 4 << 20

// Call makes a request of den's API on node, as root of the fleet (the
// fleet's key), and decodes its JSON answer into out. An error answer
// comes back with its class and hint, as the node gave them.
func (f *Forwarder) Call(ctx context.Context, node, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	return f.CallWith(ctx, node, method, path, rd, "application/json", nil, out)
}

// CallWith is Call with a body of contentType read from body as it is
// sent, a stream of any length, and trailer sent after it (its values
// set by the time body ends).
func (f *Forwarder) CallWith(ctx context.Context, node, method, path string, body io.Reader, contentType string, trailer http.Header, out any) error {
	req, err := f.asRoot(ctx, node, method, path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	req.Trailer = trailer
	resp, err := f.send(node, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return errdefs.Unavailable("reading node %s's answer: %v", node, err)
	}
	if resp.StatusCode/100 != 2 {
		return fromAnswer(node, resp.StatusCode, b)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decoding node %s's answer: %w", node, err)
	}
	return nil
}

// asRoot is a request of method and path on den's API on node, as root
// of the fleet: the node's peer URL and the fleet's headers.
func (f *Forwarder) asRoot(ctx context.Context, node, method, path string, body io.Reader) (*http.Request, error) {
	n, err := f.nodes.Node(ctx, node)
	if err != nil {
		return nil, fmt.Errorf("finding node %s: %w", node, err)
	}
	if err := reachable(n, ""); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, n.PeerURL+path, body)
	if err != nil {
		return nil, fmt.Errorf("calling node %s: %w", node, err)
	}
	req.Header.Set(HeaderKey, f.key)
	req.Header.Set(HeaderFrom, f.self)
	req.Header.Set(HeaderLocal, "1")
	return req, nil
}

// send makes req of node; a request it did not answer is Unavailable.
func (f *Forwarder) send(node string, req *http.Request) (*http.Response, error) {
	resp, err := f.proxy.Transport.RoundTrip(req)
	if err != nil {
		return nil, errdefs.WithHint(errdefs.Unavailable("node %s did not answer: %v", node, err),
			"try again shortly; `den node ls` shows whether the node is alive")
	}
	return resp, nil
}

// answerErr is the error node answered in resp, whose body it closes.
func answerErr(node string, resp *http.Response) error {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	return fromAnswer(node, resp.StatusCode, b)
}

// fromAnswer makes an error answer of another node an error of the same
// class, with its message and hint.
func fromAnswer(node string, status int, body []byte) error {
	var e api.ErrorBody
	if json.Unmarshal(body, &e) != nil || e.Error == nil {
		return errdefs.Unavailable("node %s answered %d", node, status)
	}
	class := map[string]error{
		api.CodeInvalid: errdefs.ErrInvalid, api.CodeNotFound: errdefs.ErrNotFound, api.CodeConflict: errdefs.ErrConflict,
		api.CodeTooLarge: errdefs.ErrTooLarge, api.CodeUnavailable: errdefs.ErrUnavailable, api.CodeQuotaExceeded: errdefs.ErrQuota,
	}[e.Error.Code]
	var err error
	if class != nil {
		err = errdefs.New(class, "node %s: %s", node, e.Error.Message)
	} else {
		err = fmt.Errorf("node %s: %s", node, e.Error.Message)
	}
	if e.Error.Hint != "" {
		err = errdefs.WithHint(err, e.Error.Hint)
	}
	return err
}
