import Testing
@testable import Proxy
