package core

// RenewNow exposes the watchdog's renewNow for tests.
func RenewNow(c *Client) { c.watchdog.renewNow() }
