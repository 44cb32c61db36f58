//! A printed row: its cells and conditions, as the printers produce them.

/// A cell: Go's `interface{}` values the printers produce.
pub(super) enum Cell {
    Str(String),
    Int(i64),
    Null,
}

/// `metav1.TableRowCondition`.
pub(super) struct RowCondition {
    pub(super) kind: &'static str,
    pub(super) status: &'static str,
    pub(super) reason: &'static str,
    pub(super) message: &'static str,
}

/// One printed row, before its object is attached.
pub(super) struct Row {
    pub(super) cells: Vec<Cell>,
    pub(super) conditions: &'static [RowCondition],
}
