package core

import "context"

// NopObserver implements every Observer method as a no-op. Embed it in a
// custom observer to implement only the methods you need:
//
//	type waits struct{ core.NopObserver; n atomic.Int64 }
//
//	func (w *waits) Wait(context.Context, core.WaitEvent) { w.n.Add(1) }
type NopObserver struct{}

var _ Observer = NopObserver{}

// AcquireStart returns ctx.
func (NopObserver) AcquireStart(ctx context.Context, _ AcquireStartEvent) context.Context {
	return ctx
}

// Wait does nothing.
func (NopObserver) Wait(context.Context, WaitEvent) {}

// AcquireEnd does nothing.
func (NopObserver) AcquireEnd(context.Context, AcquireEndEvent) {}

// Renew does nothing.
func (NopObserver) Renew(context.Context, RenewEvent) {}

// ReleaseStart returns ctx.
func (NopObserver) ReleaseStart(ctx context.Context, _ ReleaseEvent) context.Context { return ctx }

// ReleaseEnd does nothing.
func (NopObserver) ReleaseEnd(context.Context, ReleaseEvent) {}

// Lost does nothing.
func (NopObserver) Lost(context.Context, LostEvent) {}

// Observers returns an Observer that tells each of obs, in order, about
// every event; nil entries are skipped. The context an AcquireStart or
// ReleaseStart returns is handed to the next observer, so each can open a
// span under the one before. WithObserver composes this way when given more
// than once.
func Observers(obs ...Observer) Observer {
	var fan observerList
	for _, o := range obs {
		switch o := o.(type) {
		case nil:
		case observerList:
			fan = append(fan, o...)
		default:
			fan = append(fan, o)
		}
	}
	switch len(fan) {
	case 0:
		return nil
	case 1:
		return fan[0]
	}
	return fan
}

// observerList is Observers' result.
type observerList []Observer

func (f observerList) AcquireStart(ctx context.Context, e AcquireStartEvent) context.Context {
	for _, o := range f {
		ctx = o.AcquireStart(ctx, e)
	}
	return ctx
}

func (f observerList) Wait(ctx context.Context, e WaitEvent) {
	for _, o := range f {
		o.Wait(ctx, e)
	}
}

func (f observerList) AcquireEnd(ctx context.Context, e AcquireEndEvent) {
	for _, o := range f {
		o.AcquireEnd(ctx, e)
	}
}

func (f observerList) Renew(ctx context.Context, e RenewEvent) {
	for _, o := range f {
		o.Renew(ctx, e)
	}
}

func (f observerList) ReleaseStart(ctx context.Context, e ReleaseEvent) context.Context {
	for _, o := range f {
		ctx = o.ReleaseStart(ctx, e)
	}
	return ctx
}

func (f observerList) ReleaseEnd(ctx context.Context, e ReleaseEvent) {
	for _, o := range f {
		o.ReleaseEnd(ctx, e)
	}
}

func (f observerList) Lost(ctx context.Context, e LostEvent) {
	for _, o := range f {
		o.Lost(ctx, e)
	}
}
