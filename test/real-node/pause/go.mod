module proxyoperator.local/pause

go 1.26
