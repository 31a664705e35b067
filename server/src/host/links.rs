//! The host's side of the service's links ([`crate::outbound`]): which of
//! the transport's connections is which link, and the moving of their
//! bytes between the transport and the links' buffers.

use fairway_stack::time::Instant;
use mio::Token;

use super::{ConnIo, Transport};
use crate::outbound::Outbound;

/// Links' connections, by token and by the transport's index.
pub(super) struct Links<C> {
    by_token: Vec<Option<C>>,
    by_index: Vec<Option<(C, Token)>>,
}

impl<C: Copy + Eq> Default for Links<C> {
    fn default() -> Self {
        Links { by_token: Vec::new(), by_index: Vec::new() }
    }
}

impl<C: Copy + Eq> Links<C> {
    /// The token of `conn` (at the transport's `index`), when it is a link.
    pub(super) fn token_of(&self, conn: C, index: usize) -> Option<Token> {
        self.by_index.get(index)?.filter(|&(c, _)| c == conn).map(|(_, t)| t)
    }

    fn insert(&mut self, token: Token, conn: C, index: usize) {
        if token.0 >= self.by_token.len() {
            self.by_token.resize(token.0 + 1, None);
        }
        if index >= self.by_index.len() {
            self.by_index.resize(index + 1, None);
        }
        self.by_token[token.0] = Some(conn);
        self.by_index[index] = Some((conn, token));
    }

    /// Forgets the link of `token`: its connection, if it had one.
    pub(super) fn remove<T: Transport<Conn = C>>(&mut self, token: Token) -> Option<C> {
        let conn = self.by_token.get_mut(token.0)?.take()?;
        if let Some(entry) = self.by_index.get_mut(T::index(conn)) {
            *entry = None;
        }
        Some(conn)
    }

    /// Whether any link has a connection.
    pub(super) fn any(&self) -> bool {
        self.by_token.iter().any(Option::is_some)
    }
}

/// Moves the bytes of the link of `token`, whose connection is `conn`;
/// closes the connection when it failed.
pub(super) fn pump<T: Transport>(
    t: &mut T,
    out: &mut Outbound,
    links: &mut Links<T::Conn>,
    token: Token,
    conn: T::Conn,
) {
    if out.pump(token, &mut ConnIo { t: &mut *t, conn }).is_err() {
        links.remove::<T>(token);
        t.close(conn);
    }
}

/// What the service asked of its links since the last call: closes the
/// ones it let go, opens the ones it asked for, moves the bytes of the
/// ones it wrote to or read from.
pub(super) fn serve<T: Transport>(t: &mut T, out: &mut Outbound, links: &mut Links<T::Conn>, now: Instant) {
    if !out.link_work() {
        return;
    }
    // Closes first: their tokens are free, and may be a connect's below.
    while let Some(token) = out.take_close() {
        if let Some(conn) = links.remove::<T>(token) {
            t.close(conn);
        }
    }
    while let Some((token, to)) = out.take_connect() {
        match t.connect(now, to) {
            Ok(conn) => links.insert(token, conn, T::index(conn)),
            Err(kind) => out.link_failed(token, kind),
        }
    }
    while let Some(token) = out.take_dirty() {
        if let Some(conn) = links.by_token.get(token.0).copied().flatten() {
            pump(t, out, links, token, conn);
        }
    }
}
