//! The read loops: one side's lines read to their end, each judged in order and what
//! comes of it handed out before the next is read (so a side's frames keep their order
//! and none goes out unjudged). The end of input and read errors are handled here once.
//!
//! [`read_lines`] is the loop over a [`LineReader`]; what is done with each line is a
//! [`Feed`]: [`Relay`] for a [`Judged`] conversation (the bridge's client side, the
//! gateway's servers), the stdio proxy's pumps for the hot path (they batch writes and
//! write large server frames from the reader's buffer). [`relay_upstream`] is the loop
//! over what an upstream link reports. A large server line is handed to the judging in
//! the buffer it was read into ([`Held`]), not copied.

use std::future::Future;

use tokio::io::AsyncRead;
use tokio::sync::mpsc;

use super::Judged;
use super::judging::Held;
use crate::io::codec::LineReader;
use crate::io::{Chatter, LogLevel};
use crate::session::{Line, Peer};
use crate::upstream::link::FromUpstream;

/// What is done with each line one side sends.
pub trait Feed<R> {
    /// Judge the next line buffered in `reader` and move what comes of it; `false`: no
    /// complete line is buffered.
    fn next_line(&mut self, reader: &mut LineReader<R>) -> impl Future<Output = bool>;

    /// The buffered input is used up (or ended): write what is waiting.
    fn dry(&mut self) -> impl Future<Output = ()>;
}

/// How a side's input ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// End of file: every line was judged (a last one without its newline is refused).
    Eof,
    /// Reading failed (logged).
    Failed,
}

/// Read `from`'s side to its end, handing each line to `feed`. Lines are judged while
/// complete ones are buffered, and `feed` is told when the buffer runs dry (its writes
/// can go out in one batch, and a lone round trip is never delayed).
pub async fn read_lines<R: AsyncRead + Unpin>(
    reader: &mut LineReader<R>,
    feed: &mut impl Feed<R>,
    from: Peer,
    chatter: &Chatter,
) -> Ended {
    loop {
        while feed.next_line(reader).await {}
        feed.dry().await;
        match reader.fill().await {
            Ok(true) => {}
            Ok(false) => {
                // What is left is a last line without its newline (refused).
                while feed.next_line(reader).await {}
                feed.dry().await;
                return Ended::Eof;
            }
            Err(e) => {
                let peer = match from {
                    Peer::Client => "the client",
                    Peer::Server => "the server",
                };
                chatter.log(LogLevel::Warn, format_args!("reading from {peer}: {e}"));
                return Ended::Failed;
            }
        }
    }
}

/// The [`Feed`] of a [`Judged`] conversation: each line judged by it and handed out at
/// once.
pub struct Relay<'a, D> {
    pub driven: &'a D,
    pub from: Peer,
}

impl<R: AsyncRead + Unpin, D: Judged> Feed<R> for Relay<'_, D> {
    async fn next_line(&mut self, reader: &mut LineReader<R>) -> bool {
        let Some(line) = reader.next_buffered() else {
            return false;
        };
        let held = self.from == Peer::Server
            && matches!(line, Line::Frame(bytes) if bytes.len() >= self.driven.off_loop_bytes());
        let out = if held {
            // The reader goes on in a small buffer while the line is away (it reads
            // nothing meanwhile), and back in the line's once it is judged.
            let held = Held::detach(reader, Vec::new());
            let (out, back) = self.driven.judge_held(held).await;
            reader.reattach(back.bytes);
            out
        } else {
            self.driven.judge(self.from, line).await
        };
        self.driven.deliver(out).await;
        // A peer writing as fast as it can does not keep the thread from the other
        // conversations (the gateway serves many on one).
        tokio::task::yield_now().await;
        true
    }

    async fn dry(&mut self) {}
}

/// Read `from`'s side to its end through `driven` (see [`Relay`]).
pub async fn relay<R: AsyncRead + Unpin>(
    mut reader: LineReader<R>,
    from: Peer,
    driven: &impl Judged,
    chatter: &Chatter,
) -> Ended {
    read_lines(&mut reader, &mut Relay { driven, from }, from, chatter).await
}

/// Judge what an upstream link reports until it ends: its messages as the server's
/// lines, and the requests it could not deliver answered by the session. Returns why the
/// upstream ended the session (`None`: the link ended without saying so); what the
/// session makes of that is the transport's to decide.
pub async fn relay_upstream(
    rx: &mut mpsc::Receiver<FromUpstream>,
    driven: &impl Judged,
) -> Option<String> {
    while let Some(item) = rx.recv().await {
        let out = match item {
            FromUpstream::Message(data) if data.len() >= driven.off_loop_bytes() => {
                driven.judge_held(Held::whole(data)).await.0
            }
            FromUpstream::Message(data) => driven.judge(Peer::Server, Line::Frame(&data)).await,
            FromUpstream::TooLarge { len, head } => {
                let line = Line::TooLarge { len, head: &head };
                driven.judge(Peer::Server, line).await
            }
            FromUpstream::Unanswered { sent, why } => {
                driven
                    .act(|session, out| session.unanswered(&sent, &why, out))
                    .await
                    .0
            }
            FromUpstream::Gone(why) => return Some(why),
        };
        driven.deliver(out).await;
    }
    None
}
