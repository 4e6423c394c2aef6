//! Timers for the shutdown sequence, kept off tokio's time driver.
//!
//! With the time driver enabled, every park of the runtime locks the timer wheel and
//! reads the clock, though the proxy arms a timer only once it is shutting down: that
//! was 575 of 31,486 instructions per sequential round trip. Here one thread keeps the
//! deadlines and completes a oneshot channel at each. It starts with the first timer,
//! which comes only when the proxy is shutting down (started with the warm-up instead,
//! it changed neither the exit after EOF nor peak RSS beyond the machine's spread). A
//! timer nobody awaits any more is simply dropped at its deadline. The runtime
//! is built without the time driver, and tokio's `time` feature is a dev-dependency
//! only, so a `tokio::time` call in the proxy does not build.

use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{OnceLock, mpsc};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// Completes at its deadline.
#[derive(Debug)]
pub struct Sleep {
    /// `None`: the deadline has passed, or there is no timer thread to wait for it.
    fired: Option<oneshot::Receiver<()>>,
}

struct Armed {
    at: Instant,
    fire: oneshot::Sender<()>,
}

impl PartialEq for Armed {
    fn eq(&self, other: &Armed) -> bool {
        self.at == other.at
    }
}
impl Eq for Armed {}
impl PartialOrd for Armed {
    fn partial_cmp(&self, other: &Armed) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Armed {
    /// Reversed, so that the heap's top is the earliest deadline.
    fn cmp(&self, other: &Armed) -> std::cmp::Ordering {
        other.at.cmp(&self.at)
    }
}

/// The timer thread's inbox; `None` inside if the thread could not be started.
fn thread() -> &'static Option<mpsc::Sender<Armed>> {
    static THREAD: OnceLock<Option<mpsc::Sender<Armed>>> = OnceLock::new();
    THREAD.get_or_init(|| {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("mcpwall-timer".into())
            .spawn(move || run(&rx))
            .ok()
            .map(|_| tx)
    })
}

fn run(inbox: &mpsc::Receiver<Armed>) {
    let mut armed = BinaryHeap::new();
    loop {
        let now = Instant::now();
        while armed.peek().is_some_and(|a: &Armed| a.at <= now) {
            if let Some(a) = armed.pop() {
                let _ = a.fire.send(());
            }
        }
        let next = match armed.peek() {
            Some(a) => inbox.recv_timeout(a.at.saturating_duration_since(now)),
            None => inbox
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        match next {
            Ok(a) => armed.push(a),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// A future that completes at `deadline`.
pub fn sleep_until(deadline: Instant) -> Sleep {
    let (fire, fired) = oneshot::channel();
    let sent = thread()
        .as_ref()
        .is_some_and(|inbox| inbox.send(Armed { at: deadline, fire }).is_ok());
    // Without a timer thread the timer fires at once: a shutdown step that comes early
    // beats one that never comes.
    Sleep {
        fired: sent.then_some(fired),
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let Some(rx) = self.fired.as_mut() else {
            return Poll::Ready(());
        };
        // An error means the sender is gone without sending: only if the timer thread
        // died, which again counts as the deadline.
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
    let mut future = std::pin::pin!(future);
    // Most of these waits are over before they start (the server's output drained, the
    // client writer done): those arm no timer.
    let now = std::future::poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await;
    if let Poll::Ready(out) = now {
        return Some(out);
    }
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

    /// Timers armed in any order fire in deadline order, and a dropped one does not
    /// hold up the others.
    #[test]
    fn timers_fire_in_deadline_order() {
        let started = Instant::now();
        let first = runtime().block_on(async {
            let late = sleep_until(started + Duration::from_secs(30));
            drop(sleep_until(started + Duration::from_millis(10)));
            let early = sleep_until(started + Duration::from_millis(50));
            tokio::select! {
                () = late => "late",
                () = early => "early",
            }
        });
        assert_eq!(first, "early");
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(50), "{took:?}");
        assert!(took < Duration::from_secs(30), "{took:?}");
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
