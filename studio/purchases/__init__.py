"""The requester's side of purchases: new requests, my requests, change a request."""
