//! Tasks, served (the 2026-07-28 Tasks extension, SEP-2663): a tool call
//! that would keep its client waiting is answered at once with a task,
//! which the client polls (`tasks/get`), answers questions of
//! (`tasks/update`) and may cancel (`tasks/cancel`). Here is the store:
//! each task's status, its result or error once it has one, the questions
//! it waits on, and when it was made and last changed. The handler that
//! does the work is the binding's (it answers later, from Lua).
//!
//! A task outlives the request that made it (there are no sessions): it
//! is found by its id alone, for [`TTL`] after it last changed, and the
//! store holds at most [`MAX_TASKS`] (the oldest finished go first).

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::codec::Json;

/// How long a task is kept after it last changed.
pub const TTL: Duration = Duration::from_secs(3600);
/// How often a client should look again.
const POLL_INTERVAL_MS: i64 = 200;
pub const MAX_TASKS: usize = 4096;

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Status {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Status::Working => "working",
            Status::InputRequired => "input_required",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Cancelled)
    }
}

struct Task {
    status: Status,
    created: SystemTime,
    updated: SystemTime,
    touched: Instant,
    /// The result (completed) or the error (failed).
    outcome: Option<Json>,
    /// The questions it waits on, by key.
    questions: Vec<(Vec<u8>, Json)>,
}

#[derive(Default)]
pub struct Tasks {
    tasks: HashMap<String, Task>,
}

impl Tasks {
    /// A new task, working, or waiting on `questions` when there are any.
    pub fn create(&mut self, questions: Vec<(Vec<u8>, Json)>) -> String {
        self.forget_stale();
        let id = crate::auth::pkce::random_text(12).unwrap_or_else(|_| format!("task-{}", self.tasks.len()));
        let now = SystemTime::now();
        let status = if questions.is_empty() { Status::Working } else { Status::InputRequired };
        let task = Task { status, created: now, updated: now, touched: Instant::now(), outcome: None, questions };
        self.tasks.insert(id.clone(), task);
        id
    }

    fn forget_stale(&mut self) {
        self.tasks.retain(|_, t| t.touched.elapsed() < TTL);
        while self.tasks.len() >= MAX_TASKS {
            let oldest =
                self.tasks.iter().min_by_key(|(_, t)| (!t.status.is_terminal(), t.touched)).map(|(id, _)| id.clone());
            match oldest {
                Some(id) => self.tasks.remove(&id),
                None => break,
            };
        }
    }

    /// Whether it is there and not over: its work may still settle it.
    pub fn is_open(&self, id: &str) -> bool {
        self.tasks.get(id).is_some_and(|t| !t.status.is_terminal())
    }

    pub fn exists(&self, id: &str) -> bool {
        self.tasks.contains_key(id)
    }

    fn change(&mut self, id: &str, status: Status) -> Option<&mut Task> {
        let task = self.tasks.get_mut(id)?;
        task.status = status;
        task.updated = SystemTime::now();
        task.touched = Instant::now();
        Some(task)
    }

    /// The task's work ended: its result, or (a protocol error) its
    /// error. A task already over (cancelled) stays as it is.
    pub fn settle(&mut self, id: &str, outcome: Result<Json, Json>) {
        if self.tasks.get(id).is_none_or(|t| t.status.is_terminal()) {
            return;
        }
        let (status, value) = match outcome {
            Ok(result) => (Status::Completed, result),
            Err(error) => (Status::Failed, error),
        };
        if let Some(task) = self.change(id, status) {
            task.outcome = Some(value);
            task.questions.clear();
        }
    }

    /// The task asks its client `key` (its status says so until it is
    /// answered).
    pub fn ask(&mut self, id: &str, key: Vec<u8>, request: Json) {
        if self.tasks.get(id).is_none_or(|t| t.status.is_terminal()) {
            return;
        }
        if let Some(task) = self.change(id, Status::InputRequired) {
            task.questions.retain(|(k, _)| *k != key);
            task.questions.push((key, request));
        }
    }

    /// Answers to the questions asked (others are ignored): the ones it
    /// took, by key. The task works again once none is left.
    pub fn answer(&mut self, id: &str, answers: Vec<(Vec<u8>, Json)>) -> Vec<(Vec<u8>, Json)> {
        let Some(task) = self.tasks.get_mut(id) else { return Vec::new() };
        let taken: Vec<(Vec<u8>, Json)> =
            answers.into_iter().filter(|(k, _)| task.questions.iter().any(|(q, _)| q == k)).collect();
        task.questions.retain(|(q, _)| !taken.iter().any(|(k, _)| k == q));
        if task.questions.is_empty() && task.status == Status::InputRequired {
            self.change(id, Status::Working);
        }
        taken
    }

    /// Cancels it unless it is over already; whether it was running.
    pub fn cancel(&mut self, id: &str) -> bool {
        if self.tasks.get(id).is_none_or(|t| t.status.is_terminal()) {
            return false;
        }
        if let Some(task) = self.change(id, Status::Cancelled) {
            task.questions.clear();
        }
        true
    }

    pub fn is_cancelled(&self, id: &str) -> bool {
        self.tasks.get(id).is_some_and(|t| t.status == Status::Cancelled)
    }

    /// What `tasks/get` says of it, or what the call that made it gets
    /// (`created`: its result type is "task").
    pub fn describe(&self, id: &str, created: bool) -> Option<Json> {
        let task = self.tasks.get(id)?;
        let mut fields = vec![
            ("createdAt", Json::str(timestamp(task.created))),
            ("lastUpdatedAt", Json::str(timestamp(task.updated))),
            ("pollIntervalMs", Json::Int(POLL_INTERVAL_MS)),
            ("resultType", Json::str(if created { "task" } else { "complete" })),
            ("status", Json::str(task.status.word())),
            ("taskId", Json::str(id)),
            ("ttlMs", Json::Int(TTL.as_millis() as i64)),
        ];
        if !created {
            match (task.status, &task.outcome) {
                (Status::Completed, Some(result)) => fields.push(("result", result.clone())),
                (Status::Failed, Some(error)) => fields.push(("error", error.clone())),
                (Status::InputRequired, _) => fields.push(("inputRequests", Json::Object(task.questions.clone()))),
                _ => {}
            }
        }
        Some(Json::object(fields))
    }
}

/// `2026-12-06T15:04:05Z`, as the extension writes times.
fn timestamp(at: SystemTime) -> String {
    let seconds = at.duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let (days, rest) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let (year, month, day) = civil_date(days);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rest / 3600, rest % 3600 / 60, rest % 60)
}

/// The calendar date `days` after 1970-01-01 (Howard Hinnant's
/// days-to-civil algorithm, proleptic Gregorian).
fn civil_date(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_written_as_the_extension_reads_them() {
        assert_eq!(timestamp(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(timestamp(UNIX_EPOCH + Duration::from_secs(1_796_569_445)), "2026-12-06T15:04:05Z");
        assert_eq!(timestamp(UNIX_EPOCH + Duration::from_secs(951_782_400)), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn a_task_waits_on_its_questions_until_all_are_answered_and_a_cancelled_one_stays_cancelled() {
        let mut tasks = Tasks::default();
        let id = tasks.create(vec![(b"a".to_vec(), Json::Null), (b"b".to_vec(), Json::Null)]);
        let taken = tasks.answer(&id, vec![(b"a".to_vec(), Json::Int(1)), (b"zz".to_vec(), Json::Int(2))]);
        assert_eq!(taken.len(), 1);
        assert!(tasks.describe(&id, false).unwrap().get("inputRequests").is_some());
        tasks.answer(&id, vec![(b"b".to_vec(), Json::Int(3))]);
        assert_eq!(tasks.describe(&id, false).unwrap().get("status"), Some(&Json::str("working")));
        assert!(tasks.cancel(&id));
        tasks.settle(&id, Ok(Json::Object(vec![])));
        assert_eq!(tasks.describe(&id, false).unwrap().get("status"), Some(&Json::str("cancelled")));
        assert!(!tasks.cancel(&id), "cancelling again is only acknowledged");
    }
}
