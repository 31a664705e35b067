//! `fairway::net::TcpStream` through tokio's I/O traits (feature `tokio`):
//! an echo task on the async runtime, written with tokio's extension
//! methods (called by their traits' names: the stream's own inherent
//! `read` and `write_all` would win), on kernel sockets.

use std::io::{Read, Write};
use std::net::TcpStream as StdStream;
use std::time::Duration;

use fairway::Server;
use fairway::net::TcpListener;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[test]
fn a_task_written_against_tokio_io_echoes() {
    let server = Server::builder()
        .listen("127.0.0.1:0".parse().unwrap())
        .shards(1)
        .task(|| async {
            let listener = TcpListener::shard().expect("on a shard");
            while let Ok((mut stream, _)) = listener.accept().await {
                fairway::rt::spawn(async move {
                    let mut buf = [0u8; 64];
                    loop {
                        match AsyncReadExt::read(&mut stream, &mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                if AsyncWriteExt::write_all(&mut stream, &buf[..n]).await.is_err() {
                                    break;
                                }
                            }
                        }
                    }
                    let _ = AsyncWriteExt::shutdown(&mut stream).await;
                });
            }
        })
        .spawn()
        .unwrap();
    let mut client = StdStream::connect(server.local_addr()).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let message = b"through tokio's traits, on Fairway's executor\n".repeat(100);
    client.write_all(&message).unwrap();
    client.shutdown(std::net::Shutdown::Write).unwrap();
    let mut echoed = Vec::new();
    client.read_to_end(&mut echoed).unwrap();
    assert_eq!(echoed, message);
    server.shutdown().unwrap();
}
