//! A task of a served store, seen through a client: [`RemoteTask`] has the methods of the
//! embedded [`crate::Task`] by name (`delta`, `append`, `append_with`, `append_batch_with`,
//! `revision`, `state`), so that harness code reads the same against either; each call is the
//! [`Client`] call for the task's id. The differences a socket makes: every method may fail
//! with a [`ClientError`] (so `revision` and `state` return results, and `state` is `None`
//! before the first event), bodies are borrowed, and `delta` is pipelined: it returns no seq,
//! and a refusal of it (or of any fragment of the same client, whatever its task) is returned
//! by a later call.

use super::{Client, ClientError};
use crate::harness::{Body, TaskState};
use crate::{AppendOptions, Appended};

/// A task of a served store, through a borrowed [`Client`] ([`Client::task`]).
#[derive(Debug)]
pub struct RemoteTask<'c> {
    client: &'c mut Client,
    id: String,
}

impl Client {
    /// A handle on task `id` of the served store, with the methods of the embedded
    /// [`crate::Task`]. Nothing is sent until a method is called: the serving process takes
    /// the task over for this connection at its first append (where [`crate::Store::task`]
    /// takes it over when the handle is made).
    pub fn task(&mut self, id: &str) -> RemoteTask<'_> {
        RemoteTask { client: self, id: id.to_owned() }
    }
}

impl RemoteTask<'_> {
    /// The task's id.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The task's current revision (0 before its first event): [`Client::revision`].
    ///
    /// # Errors
    ///
    /// As [`Client::request`].
    pub fn revision(&mut self) -> Result<u64, ClientError> {
        self.client.revision(&self.id)
    }

    /// The task's folded state, `None` before its first event: [`Client::state`].
    ///
    /// # Errors
    ///
    /// As [`Client::request`].
    pub fn state(&mut self) -> Result<Option<TaskState>, ClientError> {
        self.client.state(&self.id)
    }

    /// Appends one streamed fragment, pipelined: [`Client::delta`].
    ///
    /// # Errors
    ///
    /// As [`Client::delta`].
    pub fn delta(&mut self, text: &str) -> Result<(), ClientError> {
        self.client.delta(&self.id, text)
    }

    /// Appends one event with its type's default durability: [`Client::append`].
    ///
    /// # Errors
    ///
    /// As [`Client::request`].
    pub fn append(&mut self, body: &Body) -> Result<Appended, ClientError> {
        self.client.append(&self.id, body, AppendOptions::default())
    }

    /// Appends one event with `options` (compare-and-set, durability): [`Client::append`].
    ///
    /// # Errors
    ///
    /// As [`Client::request`].
    pub fn append_with(
        &mut self,
        body: &Body,
        options: AppendOptions,
    ) -> Result<Appended, ClientError> {
        self.client.append(&self.id, body, options)
    }

    /// Appends `bodies` as one atomic batch: [`Client::append_batch`].
    ///
    /// # Errors
    ///
    /// As [`Client::request`].
    pub fn append_batch_with(
        &mut self,
        bodies: &[Body],
        options: AppendOptions,
    ) -> Result<Appended, ClientError> {
        self.client.append_batch(&self.id, bodies, options)
    }
}
