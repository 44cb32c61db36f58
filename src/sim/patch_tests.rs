//! The patch entry points: content types, dispatch, and error responses.
