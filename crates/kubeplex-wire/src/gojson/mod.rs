//! Go's `encoding/json`, where its exact bytes or messages reach a client: the encoder's output
//! (HTML-safe string escaping, Go's float format), the v1 scanner's syntax errors, the
//! decoder's lenient string unquoting, and the `strconv` quoting those messages use.
//!
//! Both the proxy (continue tokens, the list and watch bodies it assembles) and the fake
//! apiserver (object, Table and patch handling) go through this one copy.

mod quote;
mod syntax;
mod unquote;
mod write;

pub use quote::quote;
pub use syntax::{check_valid, is_space, SyntaxError, MAX_NESTING_DEPTH};
pub use unquote::unquote;
pub use write::{format_float, push_string, to_vec, write_object, write_sorted_map, write_value};
