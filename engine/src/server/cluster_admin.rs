//! The cluster admin endpoints of a replicated server (README, "Changing
//! a cluster's members"): `GET /v1/cluster` shows every group's membership
//! as this node sees it; `POST /v1/cluster/members` adds, removes or
//! replaces a node in every group.
//!
//! A change's body is one JSON object:
//!
//! ```text
//! {"op":"add",     "id":4, "raft":"10.0.0.4:7000", "http":"10.0.0.4:8080"}
//! {"op":"remove",  "id":3}
//! {"op":"replace", "old":3, "id":4, "raft":"10.0.0.4:7000", "http":"10.0.0.4:8080"}
//! ```
//!
//! with an optional `"wait_ms"` (default 60000): how long each group may
//! take. Any node takes either request; the engine runs each group's
//! change on that group's leader. A reply is the cluster as the GET shows
//! it, after the change; a change that did not finish in time is 503 with
//! `Retry-After` (send the same body again to finish it), one that cannot
//! be made 400. Parsing and rendering are pure functions, tested here.

use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::{ClusterView, Member, MemberChange};

/// How long each group may take when the body does not say.
pub(crate) const DEFAULT_WAIT: Duration = Duration::from_secs(60);

/// A change request's body as a change and its time limit.
pub(crate) fn parse_change(body: &[u8]) -> Result<(MemberChange, Duration), String> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not one JSON object: {e}"))?;
    let object = value.as_object().ok_or("the body must be a JSON object")?;
    let known = ["op", "id", "old", "raft", "http", "wait_ms"];
    if let Some(unknown) = object.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(format!("unknown field `{unknown}` (fields: {})", known.join(", ")));
    }
    let number = |field: &str| -> Result<u64, String> {
        object
            .get(field)
            .ok_or(format!("`{field}` is missing"))?
            .as_u64()
            .ok_or(format!("`{field}` must be a whole number"))
    };
    let text = |field: &str| -> Result<String, String> {
        match object.get(field) {
            None => Ok(String::new()),
            Some(v) => v.as_str().map(str::to_string).ok_or(format!("`{field}` must be a string")),
        }
    };
    let member = || -> Result<Member, String> {
        let raft = text("raft")?;
        if raft.is_empty() {
            return Err("`raft` (the joining node's raft address, host:port) is missing".into());
        }
        Ok(Member { raft_addr: raft, http_addr: text("http")? })
    };
    let op =
        object.get("op").and_then(Value::as_str).ok_or("`op` must be \"add\", \"remove\" or \"replace\"")?;
    let change = match op {
        "add" => MemberChange::Add { id: number("id")?, member: member()? },
        "remove" => MemberChange::Remove { id: number("id")? },
        "replace" => MemberChange::Replace { old: number("old")?, id: number("id")?, member: member()? },
        other => return Err(format!("`op` must be \"add\", \"remove\" or \"replace\", not {other:?}")),
    };
    let wait = match object.get("wait_ms") {
        None => DEFAULT_WAIT,
        Some(v) => Duration::from_millis(
            v.as_u64().filter(|ms| *ms > 0).ok_or("`wait_ms` must be a positive whole number")?,
        ),
    };
    Ok((change, wait))
}

/// The cluster as JSON: this node, the voters when every group agrees, how
/// many groups each node leads, every member's addresses, and each group.
pub(crate) fn render(view: &ClusterView) -> Value {
    let mut members = Map::new();
    for group in &view.groups {
        for (id, m) in &group.nodes {
            members
                .entry(id.to_string())
                .or_insert_with(|| json!({"raft": m.raft_addr, "http": m.http_addr}));
        }
    }
    let leaders: Map<String, Value> =
        view.leaders().into_iter().map(|(n, c)| (n.to_string(), json!(c))).collect();
    let groups: Vec<Value> = view
        .groups
        .iter()
        .map(|g| {
            json!({
                "group": g.group,
                "leader": g.leader,
                "term": g.term,
                "voters": g.voters,
                "learners": g.learners,
                "joint": g.joint,
                "committed": g.committed,
            })
        })
        .collect();
    json!({
        "node": view.node,
        "voters": view.voters(),
        "leaders": leaders,
        "members": members,
        "groups": groups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GroupMembers;

    #[test]
    fn changes_parse() {
        let (add, wait) =
            parse_change(br#"{"op":"add","id":4,"raft":"127.0.0.1:7004","http":"127.0.0.1:8004"}"#).unwrap();
        let member = Member { raft_addr: "127.0.0.1:7004".into(), http_addr: "127.0.0.1:8004".into() };
        assert_eq!(add, MemberChange::Add { id: 4, member: member.clone() });
        assert_eq!(wait, DEFAULT_WAIT);
        let (remove, wait) = parse_change(br#"{"op":"remove","id":3,"wait_ms":500}"#).unwrap();
        assert_eq!((remove, wait), (MemberChange::Remove { id: 3 }, Duration::from_millis(500)));
        let (replace, _) = parse_change(
            br#"{"op":"replace","old":3,"id":4,"raft":"127.0.0.1:7004","http":"127.0.0.1:8004"}"#,
        )
        .unwrap();
        assert_eq!(replace, MemberChange::Replace { old: 3, id: 4, member });
    }

    #[test]
    fn bad_bodies_say_what_is_wrong() {
        for (body, says) in [
            (&b"nope"[..], "JSON"),
            (b"[1]", "object"),
            (br#"{"op":"grow","id":4}"#, "grow"),
            (br#"{"op":"add","id":4}"#, "raft"),
            (br#"{"op":"add","id":"4","raft":"127.0.0.1:1"}"#, "whole number"),
            (br#"{"op":"remove"}"#, "`id` is missing"),
            (br#"{"op":"remove","id":3,"wait_ms":0}"#, "wait_ms"),
            (br#"{"op":"remove","id":3,"force":true}"#, "unknown field `force`"),
            (br#"{"op":"replace","id":4,"raft":"127.0.0.1:1"}"#, "`old` is missing"),
        ] {
            let err = parse_change(body).unwrap_err();
            assert!(err.contains(says), "{}: {err}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn a_view_renders_with_agreed_voters_and_leader_counts() {
        let node = |port: u16| Member { raft_addr: format!("127.0.0.1:{port}"), http_addr: String::new() };
        let group = |group: u32, leader: u64| GroupMembers {
            group,
            leader: Some(leader),
            term: 2,
            voters: [1, 2, 3].into(),
            committed: true,
            nodes: [(1, node(7001)), (2, node(7002)), (3, node(7003))].into(),
            ..GroupMembers::default()
        };
        let view = ClusterView { node: 1, groups: vec![group(0, 1), group(1, 2), group(2, 1)] };
        let json = render(&view);
        assert_eq!(json["voters"], json!([1, 2, 3]));
        assert_eq!(json["leaders"], json!({"1": 2, "2": 1}));
        assert_eq!(json["members"]["3"]["raft"], json!("127.0.0.1:7003"));
        assert_eq!(json["groups"][1]["leader"], json!(2));
        let halfway =
            ClusterView { groups: vec![group(0, 1), GroupMembers { joint: true, ..group(1, 1) }], ..view };
        assert_eq!(render(&halfway)["voters"], Value::Null, "no agreed voters in the middle of a change");
    }
}
