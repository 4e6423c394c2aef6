//! Timers for the shutdown sequence, kept off tokio's time driver.
//!
//! With the time driver enabled, every park of the runtime locks the timer wheel and
//! reads the clock, though the proxy arms a timer only once it is shutting down: that
//! was 575 of 31,486 instructions per sequential round trip. Here a timer is a thread
//! that sleeps until the deadline and then completes a oneshot channel. A timer nobody
//! awaits any more lets its thread run out at the deadline; the process does not wait
//! for it. The runtime is built without the time driver, and tokio's `time` feature is a
//! dev-dependency only, so a `tokio::time` call in the proxy does not build.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// Completes at its deadline.
#[derive(Debug)]
pub struct Sleep {
    /// `None`: the deadline has passed, or no thread could be started to wait for it.
    fired: Option<oneshot::Receiver<()>>,
}

/// A future that completes at `deadline`.
pub fn sleep_until(deadline: Instant) -> Sleep {
    let (tx, rx) = oneshot::channel();
    let started = std::thread::Builder::new()
        .name("mcpwall-timer".into())
        .spawn(move || {
            std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
            let _ = tx.send(());
        });
    // Without a thread the timer fires at once: a shutdown step that comes early beats
    // one that never comes.
    Sleep {
        fired: started.ok().map(|_| rx),
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let Some(rx) = self.fired.as_mut() else {
            return Poll::Ready(());
        };
        // An error means the sender is gone without sending: only if the thread died,
        // which again counts as the deadline.
        match Pin::new(rx).poll(cx) {
            Poll::Ready(_) => {
                self.fired = None;
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// `future`'s output, or `None` if `limit` passed first.
pub async fn timeout<F: Future>(limit: Duration, future: F) -> Option<F::Output> {
    let expired = sleep_until(Instant::now() + limit);
    tokio::select! {
        biased;
        out = future => Some(out),
        () = expired => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        // As the proxy builds it: no time driver.
        tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap()
    }

    #[test]
    fn sleep_completes_at_its_deadline_not_before() {
        let started = Instant::now();
        runtime().block_on(sleep_until(started + Duration::from_millis(60)));
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(60), "{took:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
    }

    #[test]
    fn a_past_deadline_completes_at_once() {
        let deadline = Instant::now();
        std::thread::sleep(Duration::from_millis(5));
        runtime().block_on(sleep_until(deadline));
        assert!(deadline.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn timeout_gives_the_output_or_none() {
        let rt = runtime();
        assert_eq!(
            rt.block_on(timeout(Duration::from_secs(5), async { 7 })),
            Some(7)
        );
        let started = Instant::now();
        let never = std::future::pending::<()>();
        assert_eq!(rt.block_on(timeout(Duration::from_millis(50), never)), None);
        assert!(started.elapsed() >= Duration::from_millis(50));
    }
}
