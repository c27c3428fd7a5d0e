package core

// RenewNow exposes Client.renewNow for tests.
func RenewNow(c *Client) { c.renewNow() }
