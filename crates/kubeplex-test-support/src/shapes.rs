//! The seeded clusters several test files share (the fake apiserver's `ClusterShape`): small
//! enough for a test to read all of it, with every namespace, node and kind the reads look at.
//! A test that needs more of one kind says so (`ClusterShape { pods: 800, ..SMALL }`).

use kubeplex_sim::seed::ClusterShape;

/// Lists, gets and Tables of pods, ConfigMaps and Services over three namespaces and four nodes.
pub const SMALL: ClusterShape =
    ClusterShape { nodes: 4, namespaces: 3, pods: 60, configmaps: 12, services: 3 };

/// Watches: few enough objects that a test follows each event.
pub const WATCHED: ClusterShape =
    ClusterShape { nodes: 3, namespaces: 2, pods: 20, configmaps: 2, services: 1 };
