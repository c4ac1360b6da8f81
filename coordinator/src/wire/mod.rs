//! The wire layer: what speaks to the world. The gRPC service ([`grpc`]: requests to service calls,
//! errors to `tonic::Status`, in one place), the server around it ([`server`]: health, reflection,
//! TLS, the background tasks), its incarnations over one store ([`incarnations`]: reopened after a
//! storage failure), authentication ([`auth`]), bounded connections ([`connections`]) and request
//! bytes in flight ([`request_bytes`]), one request message per call ([`one_message`]), the RPC timer, the web page and metrics ([`web`]) and the
//! status JSON ([`status_json`]). It calls the service layer and never the store directly.

pub mod auth;
pub mod connections;
pub mod grpc;
pub mod incarnations;
pub mod one_message;
pub mod request_bytes;
mod rpc_timer;
pub mod server;
pub mod status_json;
pub mod web;
