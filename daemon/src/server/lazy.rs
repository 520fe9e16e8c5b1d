//! A gRPC service built on its first request. The reflection services
//! decode the whole descriptor set of pincer's API when they are built,
//! about a millisecond each on the reference machine; built before the
//! server serves, they held up the socket's first answer on every start
//! (issue 28) for what only grpcurl and the like ever ask.

use std::convert::Infallible;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use futures_util::future::{Either, Ready, ready};
use tonic::body::Body;
use tonic::codegen::http;
use tonic::server::NamedService;
use tower::Service;

/// The service `build` makes, made on the first request and then shared
/// by every clone; `None` from `build` (it logged why) answers each
/// request `unavailable`.
pub struct Lazy<S, F> {
    build: F,
    built: Arc<OnceLock<Option<S>>>,
}

impl<S, F: Fn() -> Option<S>> Lazy<S, F> {
    pub fn new(build: F) -> Self {
        Self {
            build,
            built: Arc::default(),
        }
    }
}

impl<S, F: Clone> Clone for Lazy<S, F> {
    fn clone(&self) -> Self {
        Self {
            build: self.build.clone(),
            built: self.built.clone(),
        }
    }
}

impl<S: NamedService, F> NamedService for Lazy<S, F> {
    const NAME: &'static str = S::NAME;
}

impl<S, F> Service<http::Request<Body>> for Lazy<S, F>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible> + Clone,
    F: Fn() -> Option<S>,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Either<S::Future, Ready<Result<http::Response<Body>, Infallible>>>;

    /// Always ready: the services tonic generates are, and this one makes
    /// its inner service in `call`.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        match self.built.get_or_init(&self.build) {
            Some(service) => Either::Left(service.clone().call(request)),
            None => Either::Right(ready(Ok(tonic::Status::unavailable(
                "gRPC reflection is unavailable; pincerd's log says why",
            )
            .into_http()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A service that answers an empty 200 and counts how often it was
    /// built.
    #[derive(Clone)]
    struct Echo;

    impl NamedService for Echo {
        const NAME: &'static str = "test.Echo";
    }

    impl Service<http::Request<Body>> for Echo {
        type Response = http::Response<Body>;
        type Error = Infallible;
        type Future = Ready<Result<http::Response<Body>, Infallible>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, _: http::Request<Body>) -> Self::Future {
            ready(Ok(http::Response::new(Body::empty())))
        }
    }

    static BUILT: AtomicUsize = AtomicUsize::new(0);

    #[tokio::test]
    async fn the_service_is_built_on_the_first_request_once_and_shared_by_clones() {
        let lazy = Lazy::new(|| {
            BUILT.fetch_add(1, Ordering::SeqCst);
            Some(Echo)
        });
        assert_eq!(
            <Lazy<Echo, fn() -> Option<Echo>> as NamedService>::NAME,
            "test.Echo"
        );
        let mut a = lazy.clone();
        let mut b = lazy;
        assert_eq!(BUILT.load(Ordering::SeqCst), 0, "built before a request");
        let answer = a.call(http::Request::new(Body::empty())).await.unwrap();
        assert_eq!(answer.status(), http::StatusCode::OK);
        b.call(http::Request::new(Body::empty())).await.unwrap();
        assert_eq!(BUILT.load(Ordering::SeqCst), 1);

        let mut broken = Lazy::new(|| None::<Echo>);
        let answer = broken
            .call(http::Request::new(Body::empty()))
            .await
            .unwrap();
        let status = tonic::Status::from_header_map(answer.headers()).unwrap();
        assert_eq!(status.code(), tonic::Code::Unavailable);
    }
}
