//! The axum_postgres example (server/examples/axum_postgres.rs) against
//! Python clients, every answer checked against the database itself
//! (psql on the server's Unix socket, from wherever the clients run).

use std::time::Duration;

use crate::platform::{Target, python};
use crate::postgres::Postgres;

/// What the checks share: the database as psql reads it, and the API's
/// calls (JSON in, JSON out) on one connection each.
const HELPERS: &str = r#"
import asyncio, json, resource, subprocess
PSQL = ARGS[0].split("\n")

def db(sql):
    return subprocess.run(PSQL + [sql], capture_output=True, text=True, check=True).stdout

def rows():
    """Every to-do in the database, by id."""
    got = json.loads(db("SELECT coalesce(json_agg(t ORDER BY t.id), '[]') FROM todos t"))
    return {r["id"]: r for r in got}

def api(method, path, body=None, headers=()):
    headers = list(headers)
    data = b""
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        if not any(h.lower().startswith("content-type:") for h in headers):
            headers.append("Content-Type: application/json")
        if not data:
            headers.append("Content-Length: 0")
    st, h, b = request(method, path, data, headers)
    return st, json.loads(b) if b else None
"#;

/// Create, list, get, update and delete, each answer compared with the
/// database's row; the refusals (404 for a missing to-do, 400 for bad
/// JSON, 415 without a JSON content type, 422 for a wrong type, an empty,
/// over-long or absent change) leave the database as it was; a to-do from
/// the suggestion service holds one of `suggestions`. Then 1,000
/// requests at once, on as many connections (creates, updates, reads,
/// deletes and suggested to-dos, on rows of their own), each answer again
/// checked against the database, and its final count.
///
/// # Panics
///
/// On any wrong answer.
pub fn check_todo_api(target: &Target, db: &Postgres, suggestions: &[&str]) {
    const CHECKS: &str = r#"
SUGGESTIONS = ARGS[1].split("\n")
st, a = api("POST", "/todos", {"title": "buy milk"})
expect("create", (st, a["title"], a["done"]), (201, "buy milk", False))
expect("the created row", rows().get(a["id"]), a)
st, b = api("POST", "/todos", {"title": "  walk the dog  ", "done": True})
expect("create, trimmed, done", (st, b["title"], b["done"]), (201, "walk the dog", True))
odd = "ünïcödé ✓ | 'quoted' \"twice\" \\ back"
st, c = api("POST", "/todos", {"title": odd})
expect("create, odd characters", (st, c["title"]), (201, odd))
expect("the created rows", [rows().get(t["id"]) for t in (b, c)], [b, c])

st, listed = api("GET", "/todos"); expect("list", (st, listed), (200, list(rows().values())))
st, got = api("GET", f"/todos/{a['id']}"); expect("get", (st, got), (200, a))

st, u = api("PATCH", f"/todos/{a['id']}", {"done": True})
expect("update done", (st, u), (200, {**a, "done": True})); expect("the updated row", rows()[a["id"]], u)
st, u = api("PATCH", f"/todos/{a['id']}", {"title": "buy oat milk"})
expect("update the title", (st, u), (200, {**a, "title": "buy oat milk", "done": True}))
st, u = api("PATCH", f"/todos/{a['id']}", {"title": "buy milk", "done": False})
expect("update both", (st, u), (200, a)); expect("the updated row", rows()[a["id"]], a)

st, gone = api("DELETE", f"/todos/{b['id']}"); expect("delete", (st, gone), (204, None))
expect("the deleted row", b["id"] in rows(), False)

before = rows()
for method, body in (("GET", None), ("PATCH", {"done": False}), ("DELETE", None)):
    st, e = api(method, f"/todos/{b['id']}", body); expect(f"{method} of a deleted to-do", (st, e), (404, {"error": "no such to-do"}))
st, e = api("GET", "/todos/99999999"); expect("a to-do never made", st, 404)
st, e = api("POST", "/todos", b"{not json"); expect("bad JSON", (st, "error" in e), (400, True))
st, e = api("POST", "/todos", {"title": 5}); expect("a number for a title", (st, "error" in e), (422, True))
st, e = api("POST", "/todos", {"done": True}); expect("no title", st, 422)
st, e = api("POST", "/todos", {"title": "   "}); expect("an empty title", (st, e), (422, {"error": "the title is empty"}))
st, e = api("POST", "/todos", {"title": "x" * 201}); expect("a title too long", st, 422)
st, e = api("POST", "/todos", {"title": "é" * 200}); expect("200 characters", (st, e["title"]), (201, "é" * 200))
api("DELETE", f"/todos/{e['id']}")
st, e = api("POST", "/todos", b'{"title":"x"}', ["Content-Type: text/plain"]); expect("not JSON's type", st, 415)
st, e = api("PATCH", f"/todos/{a['id']}", {}); expect("nothing to change", st, 422)
st, e = api("PATCH", f"/todos/{a['id']}", {"title": ""}); expect("an empty new title", st, 422)
st, e = api("GET", "/todos/first"); expect("an id that is no number", (st, "error" in e), (400, True))
expect("the refusals changed nothing", rows(), before)

st, s = api("POST", "/todos/suggested", b"")
expect("suggested", (st, s["title"] in SUGGESTIONS, s["done"]), (201, True, False))
expect("the suggested row", rows().get(s["id"]), s)

# 1,000 at once, each on a row of its own: seeded straight into the database.
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, max(4096, resource.getrlimit(resource.RLIMIT_NOFILE)[1])))
seeded = json.loads(db("WITH s AS (INSERT INTO todos (title) SELECT 'seed ' || g FROM generate_series(1, 500) g "
                       "RETURNING id, title, done) SELECT json_agg(s ORDER BY s.id) FROM s"))
before = rows()
plan = [("POST", "/todos", {"title": f"load {i}", "done": i % 2 == 0}) for i in range(400)]
plan += [("PATCH", f"/todos/{t['id']}", {"title": f"{t['title']} again", "done": True}) for t in seeded[:200]]
plan += [("GET", f"/todos/{t['id']}", None) for t in seeded[200:400]]
plan += [("DELETE", f"/todos/{t['id']}", None) for t in seeded[400:]]
plan += [("POST", "/todos/suggested", b"")] * 100

async def one(barrier, method, path, body):
    r, w = await asyncio.open_connection(HOST, PORT)
    data = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    head = f"{method} {path} HTTP/1.1\r\nHost: fairway\r\nConnection: close\r\nContent-Type: application/json\r\n"
    await barrier.wait()
    w.write(head.encode() + f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    answer = await r.read()
    w.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body) if body else None

async def main():
    barrier = asyncio.Barrier(len(plan))
    return await asyncio.wait_for(asyncio.gather(*(one(barrier, *p) for p in plan)), 120)

answers = asyncio.run(main())
after = rows()
ids = set()
for (method, path, body), (st, got) in zip(plan, answers):
    what = f"{method} {path} {body!r} at once"
    if method == "POST" and path == "/todos":
        expect(what, (st, got["title"], got["done"]), (201, body["title"], body["done"]))
    elif method == "POST":
        expect(what, (st, got["title"] in SUGGESTIONS, got["done"]), (201, True, False))
    elif method == "PATCH":
        expect(what, (st, got["title"], got["done"]), (200, before[got["id"]]["title"] + " again", True))
    elif method == "GET":
        expect(what, (st, got), (200, before[int(path.split("/")[-1])]))
    else:
        expect(what, (st, got), (204, None))
        expect(f"{what}: the row", int(path.split("/")[-1]) in after, False)
        continue
    expect(f"{what}: the row", after.get(got["id"]), got)
    if method == "POST":
        ids.add(got["id"])
expect("new rows, each its own id", len(ids), 500)
expect("rows after", len(after), len(before) + 500 - 100)
print("checked", len(answers))
"#;
    let (psql, suggestions) = (db.psql().join("\n"), suggestions.join("\n"));
    let script = format!("{HELPERS}\n{CHECKS}");
    let out = python(target, &script, &[&psql, &suggestions], Duration::from_secs(180))
        .unwrap_or_else(|e| panic!("axum_postgres: {e}"));
    assert_eq!(out.trim(), "checked 1000", "axum_postgres: the script ended early");
}

/// With the database stopped: the API answers 503 (and its health check
/// 200); once it is back, the same requests succeed again, on new
/// connections from the same pools.
///
/// # Panics
///
/// On any wrong answer, or when the database cannot be stopped or started.
pub fn check_database_outage(target: &Target, db: &Postgres) {
    const DOWN: &str = r#"
for method, path, body in (("GET", "/todos", None), ("POST", "/todos", {"title": "lost"}), ("GET", "/todos/1", None)):
    for _ in range(3):
        st, e = api(method, path, body)
        expect(f"{method} {path} with the database down", (st, e["error"].startswith("database unavailable")), (503, True))
st, h, b = request("GET", "/healthz"); expect("the server itself", (st, b), (200, b"ok\n"))
print("down")
"#;
    const UP: &str = r#"
st, t = api("POST", "/todos", {"title": "after the outage"})
expect("create after the outage", st, 201); expect("its row", rows().get(t["id"]), t)
st, listed = api("GET", "/todos"); expect("list after the outage", (st, listed), (200, list(rows().values())))
print("up")
"#;
    let psql = db.psql().join("\n");
    db.stop().unwrap_or_else(|e| panic!("{e}"));
    let out = python(target, &format!("{HELPERS}\n{DOWN}"), &[&psql], Duration::from_secs(60));
    db.start_again().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.map(|o| o.trim().to_owned()), Ok("down".to_owned()));
    let out = python(target, &format!("{HELPERS}\n{UP}"), &[&psql], Duration::from_secs(60));
    assert_eq!(out.map(|o| o.trim().to_owned()), Ok("up".to_owned()));
}
