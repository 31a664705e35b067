//! A to-do API on PostgreSQL, served by axum on Fairway: create, list,
//! get, update and delete to-dos as JSON, with one pool of database
//! connections per shard (tokio-postgres through deadpool-postgres, each
//! connection a task on the shard that opened it), and one route that
//! asks another local HTTP service first (hyper-util's client over
//! `tokio::net`). Errors are HTTP answers with a JSON body: 404 for a
//! missing to-do, 400/415/422 for a request that is not the JSON asked
//! for, 502 when the other service fails, 503 while the database cannot
//! be reached.
//!
//! The database comes from `DATABASE_URL` (a libpq URL or key=value
//! string); the example creates its table if there is none:
//!
//! ```sh
//! # A throwaway PostgreSQL of your own (Debian's postgresql package; not as root):
//! /usr/lib/postgresql/*/bin/initdb -D /tmp/todo-db -U postgres --auth=trust
//! /usr/lib/postgresql/*/bin/pg_ctl -D /tmp/todo-db -o '-p 5433 -k /tmp' -l /tmp/todo-db.log start
//! DATABASE_URL=postgresql://postgres@127.0.0.1:5433/postgres cargo run --release --example axum_postgres
//! curl -H 'content-type: application/json' -d '{"title":"buy milk"}' http://127.0.0.1:8080/todos
//! curl http://127.0.0.1:8080/todos
//! curl -X PATCH -H 'content-type: application/json' -d '{"done":true}' http://127.0.0.1:8080/todos/1
//! curl -X DELETE http://127.0.0.1:8080/todos/1
//! curl -X POST http://127.0.0.1:8080/todos/suggested     # a to-do the suggestion service proposes
//! ```
//!
//! It takes the `fairway` binary's flags (`--backend afxdp --iface fw0
//! --ip 10.77.0.1/24` on the testbed, see the axum_app example); the
//! database and the suggestion service are reached through the kernel
//! (`tokio::net`) wherever the clients come from.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime};
use fairway::Builder;
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde::{Deserialize, Serialize};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

/// Connections each shard's pool keeps at most (PostgreSQL allows 100 in
/// all by default).
pub const POOL_SIZE: usize = 8;

/// How long a request waits for a pooled connection, or for a new one to
/// be opened, before it is answered 503.
const POOL_WAIT: Duration = Duration::from_secs(5);

/// How long the suggestion service has to answer before a 502.
const SUGGESTION_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest title taken.
pub const MAX_TITLE: usize = 200;

/// The one table, created at start if it is missing.
const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS todos (id BIGSERIAL PRIMARY KEY, title TEXT NOT NULL, done BOOLEAN NOT NULL DEFAULT false)";

/// A to-do, as the API answers it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Todo {
    pub id: i64,
    pub title: String,
    pub done: bool,
}

impl Todo {
    fn from_row(row: &tokio_postgres::Row) -> Todo {
        Todo { id: row.get(0), title: row.get(1), done: row.get(2) }
    }
}

/// The body of `POST /todos`.
#[derive(Deserialize)]
struct NewTodo {
    title: String,
    #[serde(default)]
    done: bool,
}

/// The body of `PATCH /todos/{id}`: what changes.
#[derive(Deserialize)]
struct TodoUpdate {
    title: Option<String>,
    done: Option<bool>,
}

/// What the suggestion service answers.
#[derive(Serialize, Deserialize)]
struct Suggestion {
    title: String,
}

/// Why a request failed, and so its status.
#[derive(Debug)]
enum ApiError {
    /// No to-do has that id: 404.
    NotFound,
    /// The body or the path is not what the route takes (axum's
    /// rejection: 400, 415 or 422).
    Rejected(StatusCode, String),
    /// Well-formed but not acceptable (an empty title): 422.
    Invalid(String),
    /// The database cannot be reached, or dropped the connection: 503.
    Unavailable(String),
    /// The database refused the query: 500.
    Database(String),
    /// The suggestion service failed or answered nonsense: 502.
    Upstream(String),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, error) = match self {
            ApiError::NotFound => (StatusCode::NOT_FOUND, "no such to-do".to_owned()),
            ApiError::Rejected(status, why) => (status, why),
            ApiError::Invalid(why) => (StatusCode::UNPROCESSABLE_ENTITY, why),
            ApiError::Unavailable(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("database unavailable: {why}")),
            ApiError::Database(why) => (StatusCode::INTERNAL_SERVER_ERROR, format!("database error: {why}")),
            ApiError::Upstream(why) => (StatusCode::BAD_GATEWAY, format!("suggestion service: {why}")),
        };
        (status, Json(serde_json::json!({ "error": error }))).into_response()
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> ApiError {
        ApiError::Rejected(rejection.status(), rejection.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> ApiError {
        ApiError::Rejected(rejection.status(), rejection.body_text())
    }
}

impl From<PoolError> for ApiError {
    /// No connection to be had: the database is down, unreachable or
    /// overloaded (every one busy for [`POOL_WAIT`]).
    fn from(e: PoolError) -> ApiError {
        ApiError::Unavailable(e.to_string())
    }
}

impl From<tokio_postgres::Error> for ApiError {
    /// An error the server reported is the query's, except those that say
    /// the server is going away or not there yet (SQLSTATE classes 08,
    /// connection exceptions, and 57, operator intervention: a shutdown);
    /// one without a server's report is the connection's (closed, reset).
    fn from(e: tokio_postgres::Error) -> ApiError {
        match e.as_db_error() {
            Some(db) if !matches!(&db.code().code()[..2], "08" | "57") => ApiError::Database(db.message().to_owned()),
            _ => ApiError::Unavailable(e.to_string()),
        }
    }
}

/// A title as taken: trimmed, not empty, at most [`MAX_TITLE`] characters.
fn valid_title(title: &str) -> Result<&str, ApiError> {
    let title = title.trim();
    match title.chars().count() {
        0 => Err(ApiError::Invalid("the title is empty".to_owned())),
        n if n > MAX_TITLE => Err(ApiError::Invalid(format!("the title is longer than {MAX_TITLE} characters"))),
        _ => Ok(title),
    }
}

/// What one shard's router holds: its own pool and HTTP client (their
/// connections are tasks on this shard), and where the suggestion service
/// is.
#[derive(Clone)]
pub struct TodoState {
    pool: Pool,
    http: Client<HttpConnector, Empty<Bytes>>,
    suggestions: axum::http::Uri,
}

impl TodoState {
    /// A pool of at most [`POOL_SIZE`] connections to `database`, and a
    /// client for the suggestion service at `suggestions`. Connects to
    /// nothing yet: the first requests do.
    #[must_use]
    pub fn new(database: &tokio_postgres::Config, suggestions: SocketAddr) -> TodoState {
        let mut database = database.clone();
        database.connect_timeout(POOL_WAIT);
        let manager = Manager::from_config(
            database,
            tokio_postgres::NoTls,
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(POOL_WAIT))
            .create_timeout(Some(POOL_WAIT))
            .build()
            .expect("a pool with a runtime for its timeouts");
        let suggestions = format!("http://{suggestions}/suggestion").parse().expect("an http URI");
        TodoState { pool, http: Client::builder(TokioExecutor::new()).build_http(), suggestions }
    }
}

/// One statement on a pooled connection (prepared once per connection).
async fn query(
    state: &TodoState,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<Vec<tokio_postgres::Row>, ApiError> {
    let client = state.pool.get().await?;
    let statement = client.prepare_cached(sql).await?;
    Ok(client.query(&statement, params).await?)
}

/// The one to-do a statement returned, or 404.
fn one(rows: &[tokio_postgres::Row]) -> Result<Todo, ApiError> {
    rows.first().map(Todo::from_row).ok_or(ApiError::NotFound)
}

async fn insert(state: &TodoState, title: &str, done: bool) -> Result<(StatusCode, Json<Todo>), ApiError> {
    let rows =
        query(state, "INSERT INTO todos (title, done) VALUES ($1, $2) RETURNING id, title, done", &[&title, &done])
            .await?;
    Ok((StatusCode::CREATED, Json(one(&rows)?)))
}

async fn create(
    State(state): State<TodoState>,
    body: Result<Json<NewTodo>, JsonRejection>,
) -> Result<(StatusCode, Json<Todo>), ApiError> {
    let Json(new) = body?;
    insert(&state, valid_title(&new.title)?, new.done).await
}

async fn list(State(state): State<TodoState>) -> Result<Json<Vec<Todo>>, ApiError> {
    let rows = query(&state, "SELECT id, title, done FROM todos ORDER BY id", &[]).await?;
    Ok(Json(rows.iter().map(Todo::from_row).collect()))
}

async fn fetch(State(state): State<TodoState>, id: Result<Path<i64>, PathRejection>) -> Result<Json<Todo>, ApiError> {
    let Path(id) = id?;
    Ok(Json(one(&query(&state, "SELECT id, title, done FROM todos WHERE id = $1", &[&id]).await?)?))
}

async fn update(
    State(state): State<TodoState>,
    id: Result<Path<i64>, PathRejection>,
    body: Result<Json<TodoUpdate>, JsonRejection>,
) -> Result<Json<Todo>, ApiError> {
    let (Path(id), Json(change)) = (id?, body?);
    if change.title.is_none() && change.done.is_none() {
        return Err(ApiError::Invalid("nothing to change: give a title, done, or both".to_owned()));
    }
    let title = change.title.as_deref().map(valid_title).transpose()?;
    let rows = query(
        &state,
        "UPDATE todos SET title = COALESCE($2, title), done = COALESCE($3, done) WHERE id = $1 \
         RETURNING id, title, done",
        &[&id, &title, &change.done],
    )
    .await?;
    Ok(Json(one(&rows)?))
}

async fn delete(State(state): State<TodoState>, id: Result<Path<i64>, PathRejection>) -> Result<StatusCode, ApiError> {
    let Path(id) = id?;
    let rows = query(&state, "DELETE FROM todos WHERE id = $1 RETURNING id, title, done", &[&id]).await?;
    one(&rows).map(|_| StatusCode::NO_CONTENT)
}

/// Asks the suggestion service for a title (one HTTP/1.1 request on the
/// shard's pooled client), then stores it as a new to-do.
async fn suggested(State(state): State<TodoState>) -> Result<(StatusCode, Json<Todo>), ApiError> {
    let upstream = |e: &dyn std::fmt::Display| ApiError::Upstream(e.to_string());
    let asked = async {
        let answer = state.http.get(state.suggestions.clone()).await.map_err(|e| upstream(&e))?;
        if answer.status() != StatusCode::OK {
            return Err(upstream(&answer.status()));
        }
        answer.into_body().collect().await.map(|body| body.to_bytes()).map_err(|e| upstream(&e))
    };
    let body = tokio::time::timeout(SUGGESTION_TIMEOUT, asked).await.map_err(|e| upstream(&e))??;
    let suggestion: Suggestion = serde_json::from_slice(&body).map_err(|e| upstream(&e))?;
    let title = valid_title(&suggestion.title).map_err(|_| upstream(&"an unusable title"))?;
    insert(&state, title, false).await
}

/// The application, one per shard, each with its own [`TodoState`].
pub fn app(state: TodoState) -> Router {
    Router::new()
        .route("/todos", get(list).post(create))
        .route("/todos/suggested", post(suggested))
        .route("/todos/{id}", get(fetch).patch(update).delete(delete))
        .route("/healthz", get(|| async { "ok\n" }))
        .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, Duration::from_secs(10)))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// Creates the table if it is missing, on a connection of its own (a
/// runtime of its own too: this runs before the server's shards).
///
/// # Errors
///
/// The database cannot be reached or refuses.
pub fn prepare_database(database: &tokio_postgres::Config) -> Result<(), tokio_postgres::Error> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    runtime.block_on(async {
        let (client, connection) = database.connect(tokio_postgres::NoTls).await?;
        tokio::spawn(connection);
        client.batch_execute(SCHEMA).await
    })
}

/// What the suggestion service proposes, in turn.
pub const SUGGESTIONS: [&str; 4] = ["water the plants", "call the plumber", "back up the laptop", "read a book"];

/// A small HTTP service on `127.0.0.1` (a port of its own, a thread and
/// a tokio runtime of its own): `GET /suggestion` answers the next of
/// [`SUGGESTIONS`] as `{"title": ...}`, everything else 404. The other
/// service the example's `/todos/suggested` talks to.
///
/// # Errors
///
/// The port cannot be bound.
pub fn suggestion_service() -> std::io::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    let addr = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let next = Arc::new(AtomicU64::new(0));
    std::thread::Builder::new().name("suggestions".into()).spawn(move || {
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("a listener");
            while let Ok((stream, _)) = listener.accept().await {
                let next = Arc::clone(&next);
                let answer = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let n = next.fetch_add(1, Ordering::Relaxed) as usize;
                    let (status, body) = if request.uri().path() == "/suggestion" {
                        let title = SUGGESTIONS[n % SUGGESTIONS.len()].to_owned();
                        (StatusCode::OK, serde_json::to_vec(&Suggestion { title }).expect("JSON"))
                    } else {
                        (StatusCode::NOT_FOUND, Vec::new())
                    };
                    let mut response = hyper::Response::new(Full::new(Bytes::from(body)));
                    *response.status_mut() = status;
                    async move { Ok::<_, std::convert::Infallible>(response) }
                });
                tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), answer));
            }
        });
    })?;
    Ok(addr)
}

fn main() {
    let builder = Builder::from_args().unwrap_or_else(|e| e.exit());
    if let Err(e) = fairway::logging::init(&builder.configuration().log) {
        eprintln!("axum_postgres: {e}");
        std::process::exit(2);
    }
    let Ok(url) = std::env::var("DATABASE_URL") else {
        eprintln!("axum_postgres: set DATABASE_URL, e.g. postgresql://postgres@127.0.0.1:5432/postgres");
        std::process::exit(2);
    };
    let database: tokio_postgres::Config = match url.parse() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("axum_postgres: DATABASE_URL: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = prepare_database(&database) {
        eprintln!("axum_postgres: cannot prepare the database: {e}");
        std::process::exit(1);
    }
    let suggestions = match suggestion_service() {
        Ok(addr) => addr,
        Err(e) => {
            eprintln!("axum_postgres: cannot start the suggestion service: {e}");
            std::process::exit(1);
        }
    };
    // The factory runs once per shard: each gets its own pool and client.
    if let Err(e) = builder.axum(move || app(TodoState::new(&database, suggestions))).run() {
        eprintln!("axum_postgres: {e}");
        std::process::exit(1);
    }
}
