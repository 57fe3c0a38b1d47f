//! Links the addon the way Node loads it (`napi_build::setup`: the Node-API symbols are
//! resolved by the process that loads `factlog.node`).

fn main() {
    napi_build::setup();
}
